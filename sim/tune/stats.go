package tune

import (
	"fmt"
	"math"
)

// Estimate is a mean over seeds with its 95 % confidence interval
// (Student's t: the seeds are few). With one seed the interval is the
// point itself.
type Estimate struct {
	Mean float64
	Lo   float64
	Hi   float64
	N    int
}

// estimate returns the mean of xs and its 95 % confidence interval.
func estimate(xs []float64) Estimate {
	n := len(xs)
	if n == 0 {
		return Estimate{}
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(n)
	if n == 1 {
		return Estimate{Mean: mean, Lo: mean, Hi: mean, N: 1}
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	half := tQuantile975(n-1) * math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
	return Estimate{Mean: mean, Lo: mean - half, Hi: mean + half, N: n}
}

// String renders "mean ±half", as in "12.3 ±1.4".
func (e Estimate) String() string { return e.format("%.3g") }

func (e Estimate) format(verb string) string {
	if e.N == 0 {
		return "-"
	}
	s := fmt.Sprintf(verb, e.Mean)
	if half := (e.Hi - e.Lo) / 2; half > 0 {
		s += " ±" + fmt.Sprintf(verb, half)
	}
	return s
}

// t975 holds the 0.975 quantiles of Student's t distribution for 1 to 30
// degrees of freedom.
var t975 = [...]float64{
	12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
}

func tQuantile975(df int) float64 {
	if df >= 1 && df <= len(t975) {
		return t975[df-1]
	}
	return 1.96
}
