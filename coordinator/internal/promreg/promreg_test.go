package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterAllOrNone(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "a"})
	taken := prometheus.NewCounter(prometheus.CounterOpts{Name: "b_total", Help: "b"})
	if err := reg.Register(taken); err != nil {
		t.Fatal(err)
	}
	dup := prometheus.NewCounter(prometheus.CounterOpts{Name: "b_total", Help: "b"})
	if _, err := Register(reg, a, dup); err == nil {
		t.Fatal("registered a duplicate")
	}
	// a was rolled back: it registers again.
	s, err := Register(reg, a)
	if err != nil {
		t.Fatalf("a after the failed set: %v", err)
	}
	s.Unregister()
	s.Unregister()
	if err := reg.Register(a); err != nil {
		t.Fatalf("a after Unregister: %v", err)
	}
	var none *Set
	none.Unregister()
}
