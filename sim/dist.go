package sim

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Dist is a distribution of durations: network delays, pause lengths, the
// time between pauses, start-up times. Every sample comes from the
// *rand.Rand the simulator passes in, so a run is reproducible from its seed.
//
// Parse one with [ParseDist]; the syntax is that of scenario files:
//
//	2s                                    fixed
//	fixed(2s)                             fixed
//	exp(mean=10m)                         exponential
//	uniform(min=1s,max=5s)                uniform
//	lognormal(median=2ms,p99=20ms)        log-normal, by two quantiles
//	lognormal(median=2ms,sigma=1.2)       log-normal, by median and σ
//	pareto(p99=2s,max=20s)                Pareto (α 1.5 unless given), capped
//	pareto(min=50ms,alpha=1.2)            Pareto by scale and shape
//	pareto(p50=150ms,p99=2s)              Pareto by two quantiles
//	empirical(10ms,20ms,35ms,2s,14s)      each listed value equally likely
//	empirical(file=gc-pauses.txt)         one duration per line (# comments)
//
// Every distribution but fixed takes max= to cap its samples (a GC pause
// log's longest pause, a network's worst delay). Samples are never negative.
type Dist interface {
	// Sample draws one duration.
	Sample(r *rand.Rand) time.Duration
	// Quantile returns the q-quantile, 0 < q < 1 (capped like samples).
	Quantile(q float64) time.Duration
	// String renders the distribution in the syntax ParseDist reads.
	String() string
}

// ErrBadDist is wrapped by every error of [ParseDist].
var ErrBadDist = errors.New("sim: bad distribution")

// z99 is the 0.99 quantile of the standard normal distribution.
const z99 = 2.3263478740408408

// Fixed is a distribution that always gives the same duration.
type Fixed time.Duration

// Sample implements Dist.
func (f Fixed) Sample(*rand.Rand) time.Duration { return time.Duration(f) }

// Quantile implements Dist.
func (f Fixed) Quantile(float64) time.Duration { return time.Duration(f) }

func (f Fixed) String() string { return time.Duration(f).String() }

// Exp is the exponential distribution with the given mean: the time between
// events that happen at a constant rate (pauses, crashes).
type Exp struct{ Mean time.Duration }

// Sample implements Dist.
func (e Exp) Sample(r *rand.Rand) time.Duration {
	return toDuration(r.ExpFloat64() * float64(e.Mean))
}

// Quantile implements Dist.
func (e Exp) Quantile(q float64) time.Duration {
	return toDuration(-math.Log1p(-q) * float64(e.Mean))
}

func (e Exp) String() string { return "exp(mean=" + e.Mean.String() + ")" }

// Uniform is the uniform distribution on [Min, Max].
type Uniform struct{ Min, Max time.Duration }

// Sample implements Dist.
func (u Uniform) Sample(r *rand.Rand) time.Duration {
	return u.Min + toDuration(r.Float64()*float64(u.Max-u.Min))
}

// Quantile implements Dist.
func (u Uniform) Quantile(q float64) time.Duration {
	return u.Min + toDuration(q*float64(u.Max-u.Min))
}

func (u Uniform) String() string {
	return "uniform(min=" + u.Min.String() + ",max=" + u.Max.String() + ")"
}

// LogNormal is the log-normal distribution whose logarithm (of nanoseconds)
// has mean Mu and standard deviation Sigma: the usual shape of network
// delays, a bulk near the median with a long right tail.
type LogNormal struct{ Mu, Sigma float64 }

// Sample implements Dist.
func (l LogNormal) Sample(r *rand.Rand) time.Duration {
	return toDuration(math.Exp(l.Mu + l.Sigma*r.NormFloat64()))
}

// Quantile implements Dist.
func (l LogNormal) Quantile(q float64) time.Duration {
	return toDuration(math.Exp(l.Mu + l.Sigma*math.Sqrt2*math.Erfinv(2*q-1)))
}

func (l LogNormal) String() string {
	return "lognormal(median=" + toDuration(math.Exp(l.Mu)).String() +
		",sigma=" + strconv.FormatFloat(l.Sigma, 'g', 4, 64) + ")"
}

// Pareto is the Pareto distribution with scale Min (the smallest value) and
// shape Alpha: a heavy tail, as garbage-collection pauses have. The smaller
// Alpha, the heavier the tail.
type Pareto struct {
	Min   time.Duration
	Alpha float64
}

// Sample implements Dist.
func (p Pareto) Sample(r *rand.Rand) time.Duration {
	return toDuration(float64(p.Min) * math.Pow(1-r.Float64(), -1/p.Alpha))
}

// Quantile implements Dist.
func (p Pareto) Quantile(q float64) time.Duration {
	return toDuration(float64(p.Min) * math.Pow(1-q, -1/p.Alpha))
}

func (p Pareto) String() string {
	return "pareto(min=" + p.Min.String() + ",alpha=" + strconv.FormatFloat(p.Alpha, 'g', 4, 64) + ")"
}

// Empirical draws each of its values with equal probability: give it the
// pause lengths of a GC log to replay a real workload's pauses.
type Empirical struct {
	values []time.Duration // sorted
}

// NewEmpirical returns the distribution that draws each of values with
// equal probability. values must not be empty or hold negative durations.
func NewEmpirical(values []time.Duration) (*Empirical, error) {
	if len(values) == 0 {
		return nil, fmt.Errorf("%w: empirical distribution without values", ErrBadDist)
	}
	v := slices.Clone(values)
	slices.Sort(v)
	if v[0] < 0 {
		return nil, fmt.Errorf("%w: empirical value %v is negative", ErrBadDist, v[0])
	}
	return &Empirical{values: v}, nil
}

// Sample implements Dist.
func (e *Empirical) Sample(r *rand.Rand) time.Duration {
	return e.values[r.IntN(len(e.values))]
}

// Quantile implements Dist: the nearest-rank quantile of the values.
func (e *Empirical) Quantile(q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(e.values)))) - 1
	return e.values[max(0, min(i, len(e.values)-1))]
}

func (e *Empirical) String() string {
	parts := make([]string, len(e.values))
	for i, v := range e.values {
		parts[i] = v.String()
	}
	return "empirical(" + strings.Join(parts, ",") + ")"
}

// Capped caps the samples and quantiles of D at Max.
type Capped struct {
	D   Dist
	Max time.Duration
}

// Sample implements Dist.
func (c Capped) Sample(r *rand.Rand) time.Duration { return min(c.D.Sample(r), c.Max) }

// Quantile implements Dist.
func (c Capped) Quantile(q float64) time.Duration { return min(c.D.Quantile(q), c.Max) }

func (c Capped) String() string {
	s := c.D.String()
	return s[:len(s)-1] + ",max=" + c.Max.String() + ")"
}

// toDuration converts nanoseconds to a Duration, clamping to [0, MaxInt64].
func toDuration(ns float64) time.Duration {
	switch {
	case ns >= math.MaxInt64 || math.IsInf(ns, 1):
		return math.MaxInt64
	case ns > 0:
		return time.Duration(ns)
	}
	return 0 // negative or NaN
}

// ParseDist parses a distribution in the syntax described at [Dist].
func ParseDist(s string) (Dist, error) {
	d, err := parseDist(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrBadDist, s, err)
	}
	return d, nil
}

func parseDist(s string) (Dist, error) {
	open := strings.IndexByte(s, '(')
	if open < 0 {
		d, err := parseNonNegDuration(s)
		if err != nil {
			return nil, err
		}
		return Fixed(d), nil
	}
	if !strings.HasSuffix(s, ")") {
		return nil, errors.New("missing closing parenthesis")
	}
	name, body := s[:open], s[open+1:len(s)-1]
	var pos []string
	named := map[string]string{}
	var order []string
	if strings.TrimSpace(body) != "" {
		for _, p := range strings.Split(body, ",") {
			p = strings.TrimSpace(p)
			if k, v, ok := strings.Cut(p, "="); ok {
				k = strings.TrimSpace(k)
				if _, dup := named[k]; dup {
					return nil, fmt.Errorf("%s given twice", k)
				}
				named[k] = strings.TrimSpace(v)
				order = append(order, k)
			} else {
				pos = append(pos, p)
			}
		}
	}
	a := &distArgs{named: named}
	var d Dist
	var err error
	switch name {
	case "fixed":
		if len(pos) != 1 || len(named) != 0 {
			return nil, errors.New("fixed takes one duration, as in fixed(2s)")
		}
		var v time.Duration
		v, err = parseNonNegDuration(pos[0])
		d = Fixed(v)
	case "exp":
		if len(pos) == 1 {
			named["mean"] = pos[0]
			pos = nil
		}
		d, err = a.exp()
	case "uniform":
		if len(pos) == 2 {
			named["min"], named["max"] = pos[0], pos[1]
			pos = nil
		}
		d, err = a.uniform()
	case "lognormal":
		d, err = a.lognormal()
	case "pareto":
		d, err = a.pareto()
	case "empirical":
		d, err = parseEmpirical(pos, named)
		pos = nil
	default:
		return nil, fmt.Errorf("unknown distribution %q (want fixed, exp, uniform, lognormal, pareto or empirical)", name)
	}
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 {
		return nil, fmt.Errorf("unexpected argument %q", pos[0])
	}
	if name != "fixed" && name != "uniform" {
		if v, ok := named["max"]; ok {
			a.used("max")
			m, err := parseNonNegDuration(v)
			if err != nil {
				return nil, fmt.Errorf("max: %v", err)
			}
			if m < d.Quantile(0.5) {
				return nil, fmt.Errorf("max %v is below the median %v", m, d.Quantile(0.5))
			}
			d = Capped{D: d, Max: m}
		}
	}
	for _, k := range order {
		if !a.seen[k] && name != "empirical" {
			return nil, fmt.Errorf("unknown argument %q for %s", k, name)
		}
	}
	return d, nil
}

// distArgs reads named arguments and remembers which were used.
type distArgs struct {
	named map[string]string
	seen  map[string]bool
}

func (a *distArgs) used(k string) {
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	a.seen[k] = true
}

func (a *distArgs) dur(k string) (time.Duration, bool, error) {
	v, ok := a.named[k]
	if !ok {
		return 0, false, nil
	}
	a.used(k)
	d, err := parseNonNegDuration(v)
	if err != nil {
		return 0, true, fmt.Errorf("%s: %v", k, err)
	}
	return d, true, nil
}

func (a *distArgs) float(k string) (float64, bool, error) {
	v, ok := a.named[k]
	if !ok {
		return 0, false, nil
	}
	a.used(k)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return 0, true, fmt.Errorf("%s: %q is not a positive number", k, v)
	}
	return f, true, nil
}

func (a *distArgs) exp() (Dist, error) {
	mean, ok, err := a.dur("mean")
	if err != nil {
		return nil, err
	}
	if !ok || mean <= 0 {
		return nil, errors.New("exp needs a positive mean, as in exp(mean=10m)")
	}
	return Exp{Mean: mean}, nil
}

func (a *distArgs) uniform() (Dist, error) {
	lo, ok1, err := a.dur("min")
	if err != nil {
		return nil, err
	}
	hi, ok2, err := a.dur("max")
	if err != nil {
		return nil, err
	}
	if !ok1 || !ok2 || hi < lo {
		return nil, errors.New("uniform needs min <= max, as in uniform(min=1s,max=5s)")
	}
	return Uniform{Min: lo, Max: hi}, nil
}

func (a *distArgs) lognormal() (Dist, error) {
	med, okMed, err := a.dur("median")
	if err != nil {
		return nil, err
	}
	if !okMed {
		med, okMed, err = a.dur("p50")
		if err != nil {
			return nil, err
		}
	}
	p99, okP99, err := a.dur("p99")
	if err != nil {
		return nil, err
	}
	sigma, okSigma, err := a.float("sigma")
	if err != nil {
		return nil, err
	}
	switch {
	case !okMed || med <= 0:
		return nil, errors.New("lognormal needs a positive median, as in lognormal(median=2ms,p99=20ms)")
	case okP99 && okSigma:
		return nil, errors.New("lognormal takes p99 or sigma, not both")
	case okP99:
		if p99 <= med {
			return nil, fmt.Errorf("p99 %v must exceed the median %v", p99, med)
		}
		sigma = math.Log(float64(p99)/float64(med)) / z99
	case !okSigma:
		return nil, errors.New("lognormal needs p99 or sigma besides the median")
	}
	return LogNormal{Mu: math.Log(float64(med)), Sigma: sigma}, nil
}

// defaultParetoAlpha is the shape of pareto(p99=...) when no second
// parameter is given: heavy enough that the worst pauses are ten times the
// p99 at about one in ten thousand.
const defaultParetoAlpha = 1.5

func (a *distArgs) pareto() (Dist, error) {
	lo, okMin, err := a.dur("min")
	if err != nil {
		return nil, err
	}
	alpha, okAlpha, err := a.float("alpha")
	if err != nil {
		return nil, err
	}
	p50, okP50, err := a.dur("p50")
	if err != nil {
		return nil, err
	}
	p99, okP99, err := a.dur("p99")
	if err != nil {
		return nil, err
	}
	n := 0
	for _, ok := range []bool{okMin, okAlpha, okP50, okP99} {
		if ok {
			n++
		}
	}
	if n > 2 {
		return nil, errors.New("pareto takes two of min, alpha, p50 and p99")
	}
	if n == 1 && !okAlpha {
		alpha, okAlpha = defaultParetoAlpha, true
	}
	// Q(q) = min·(1−q)^(−1/α): solve for the missing parameter.
	quant := func(q float64, v time.Duration) {
		if okAlpha {
			lo = toDuration(float64(v) / math.Pow(1-q, -1/alpha))
			okMin = true
		} else {
			alpha = -math.Log(1-q) / math.Log(float64(v)/float64(lo))
			okAlpha = true
		}
	}
	switch {
	case okP50 && okP99:
		if p99 <= p50 || p50 <= 0 {
			return nil, fmt.Errorf("p99 %v must exceed p50 %v", p99, p50)
		}
		// (p99/p50) = (0.01/0.5)^(−1/α) = 50^(1/α)
		alpha = math.Log(50) / math.Log(float64(p99)/float64(p50))
		okAlpha = true
		quant(0.5, p50)
	case okP99:
		if okMin && p99 <= lo {
			return nil, fmt.Errorf("p99 %v must exceed min %v", p99, lo)
		}
		quant(0.99, p99)
	case okP50:
		if okMin && p50 <= lo {
			return nil, fmt.Errorf("p50 %v must exceed min %v", p50, lo)
		}
		quant(0.5, p50)
	}
	if !okMin || !okAlpha || lo <= 0 {
		return nil, errors.New("pareto needs a positive scale: give p99 (and optionally alpha), or min and alpha")
	}
	return Pareto{Min: lo, Alpha: alpha}, nil
}

func parseEmpirical(pos []string, named map[string]string) (Dist, error) {
	var values []time.Duration
	for k, v := range named {
		switch k {
		case "max":
		case "file":
			vs, err := readDurations(v)
			if err != nil {
				return nil, err
			}
			values = append(values, vs...)
		default:
			return nil, fmt.Errorf("unknown argument %q for empirical", k)
		}
	}
	for _, p := range pos {
		d, err := parseNonNegDuration(p)
		if err != nil {
			return nil, err
		}
		values = append(values, d)
	}
	return NewEmpirical(values)
}

// readDurations reads one duration per line; blank lines and lines
// starting with # are skipped. A bare number is taken as milliseconds, as
// GC logs print pause times.
func readDurations(path string) ([]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []time.Duration
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		if ms, err := strconv.ParseFloat(s, 64); err == nil {
			if ms < 0 || math.IsNaN(ms) {
				return nil, fmt.Errorf("%s:%d: negative duration %q", path, line, s)
			}
			out = append(out, toDuration(ms*float64(time.Millisecond)))
			continue
		}
		d, err := parseNonNegDuration(s)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		out = append(out, d)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func parseNonNegDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (as in 250ms, 2s, 1m30s)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %v is negative", d)
	}
	return d, nil
}
