package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrScenario is wrapped by every error of [ParseScenario] and
// [Scenario.Set]; the message names the line, the command and the argument.
var ErrScenario = errors.New("sim: bad scenario")

// cmdLine is one command of a scenario file: "name key=value ...".
type cmdLine struct {
	line int // 1-based; 0 for a command added by Set
	cmd  string
	args []cmdArg
}

type cmdArg struct{ key, val string }

// ParseScenario parses a scenario written in the scenario language: one
// command per line, with key=value arguments, # starting a comment.
// Values may hold parentheses with commas inside, as distributions and node
// lists do. The commands:
//
//	members n=16 static=false start=uniform(min=1s,max=3s) assignor=uniform
//	topic name=work partitions=64
//	timing heartbeat=1s session=10s rebalance=30s initial-delay=3s margin=200ms drift=0.01 request-timeout=1s conn-grace=3s view-settle=10s keepalive=15s takeover-grace=30s
//	clocks skew=0.005
//	network delay=lognormal(median=2ms,p99=20ms) loss=0.001 dup=0.0001 reorder=0.01
//	link nodes=(m1,m2) delay=50ms loss=0.01
//	pauses every=exp(mean=10m) length=pareto(p99=2s,max=20s) members=(m1,m2)
//	pause member=m3 at=60s for=15s
//	crash member=m3 at=60s restart=5s host=false
//	crashes every=exp(mean=1h) restart=10s host=false
//	conn-drops every=exp(mean=10m)
//	rolling-restart at=2m surge=1 every=10s restart=5s
//	scale-out at=5m n=4
//	scale-in at=7m n=4
//	cut at=3m nodes=(m1,m2) heal=20s
//	failover at=5m takeover=3s   (or ttl=5s: the delay drawn from the election TTL)
//	work every=100ms start=10ms stop=50ms inflight=1
//	run for=10m
//
// Members are named m1, m2, ... in launch order (a member argument may
// also be a bare number); "coord" is the coordinator. Durations are Go
// durations (250ms, 1m30s); distributions are as [ParseDist] reads them.
// Settings not given keep their defaults: [DefaultTiming], a network
// delay of lognormal(median=1ms,p99=5ms) without loss, no work.
//
// Errors name the line and the argument, as in
// `gc-pauses line 4: timing: argument session: "10x" is not a duration`.
func ParseScenario(name, src string) (*Scenario, error) {
	var lines []cmdLine
	for i, raw := range strings.Split(src, "\n") {
		text, _, _ := strings.Cut(raw, "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		l, err := tokenize(i+1, text)
		if err != nil {
			return nil, fmt.Errorf("%w: %s line %d: %v", ErrScenario, name, i+1, err)
		}
		lines = append(lines, l)
	}
	s := &Scenario{Name: name, lines: lines}
	if err := s.compile(); err != nil {
		return nil, err
	}
	return s, nil
}

// tokenize splits a command line at spaces outside parentheses.
func tokenize(line int, text string) (cmdLine, error) {
	var fields []string
	depth, start := 0, -1
	for i, r := range text {
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth--
			if depth < 0 {
				return cmdLine{}, errors.New("unbalanced ')'")
			}
		}
		space := r == ' ' || r == '\t'
		if space && depth == 0 {
			if start >= 0 {
				fields = append(fields, text[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if depth != 0 {
		return cmdLine{}, errors.New("unbalanced '('")
	}
	if start >= 0 {
		fields = append(fields, text[start:])
	}
	l := cmdLine{line: line, cmd: fields[0]}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return cmdLine{}, fmt.Errorf("%s: argument %q is not key=value", l.cmd, f)
		}
		for _, a := range l.args {
			if a.key == k {
				return cmdLine{}, fmt.Errorf("%s: argument %s given twice", l.cmd, k)
			}
		}
		l.args = append(l.args, cmdArg{k, v})
	}
	return l, nil
}

// Set changes one argument of the scenario, as `tenure sim --set` does:
// key is "command.argument" (timing.session, members.n, run.for,
// network.loss, ...). It changes the first line of that command, or adds
// the command if the scenario has none. The scenario is checked again; on
// error nothing changes.
func (s *Scenario) Set(key, value string) error {
	cmd, arg, ok := strings.Cut(key, ".")
	if !ok || cmd == "" || arg == "" {
		return fmt.Errorf("%w: --set %s: want command.argument=value, as in timing.session=10s", ErrScenario, key)
	}
	if _, known := commandSpecs[cmd]; !known {
		return fmt.Errorf("%w: --set %s: unknown command %q", ErrScenario, key, cmd)
	}
	lines := slices.Clone(s.lines)
	i := slices.IndexFunc(lines, func(l cmdLine) bool { return l.cmd == cmd })
	if i < 0 {
		lines = append(lines, cmdLine{cmd: cmd})
		i = len(lines) - 1
	}
	l := &lines[i]
	l.args = slices.Clone(l.args)
	j := slices.IndexFunc(l.args, func(a cmdArg) bool { return a.key == arg })
	if j < 0 {
		l.args = append(l.args, cmdArg{arg, value})
	} else {
		l.args[j].val = value
	}
	next := &Scenario{Name: s.Name, lines: lines}
	if err := next.compile(); err != nil {
		return err
	}
	*s = *next
	return nil
}

// Clone returns a deep copy of s that can be changed without changing s.
func (s *Scenario) Clone() *Scenario {
	c := *s
	c.lines = slices.Clone(s.lines)
	c.Topics = slices.Clone(s.Topics)
	c.Pauses = slices.Clone(s.Pauses)
	c.Crashes = slices.Clone(s.Crashes)
	c.Actions = slices.Clone(s.Actions)
	if s.Links != nil {
		c.Links = make(map[string]Link, len(s.Links))
		for k, v := range s.Links {
			c.Links[k] = v
		}
	}
	return &c
}

// Source renders the scenario in the scenario language, one command per
// line, as parsed (and changed by Set).
func (s *Scenario) Source() string {
	var b strings.Builder
	for _, l := range s.lines {
		b.WriteString(l.cmd)
		for _, a := range l.args {
			b.WriteString(" " + a.key + "=" + a.val)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// commandSpecs lists each command's arguments and compiles one line.
var commandSpecs = map[string]func(s *Scenario, a *argReader){
	"members":         compileMembers,
	"topic":           compileTopic,
	"timing":          compileTiming,
	"clocks":          compileClocks,
	"network":         compileNetwork,
	"link":            compileLink,
	"pauses":          compilePauses,
	"pause":           compilePause,
	"crash":           compileCrash,
	"crashes":         compileCrashes,
	"conn-drops":      compileConnDrops,
	"rolling-restart": compileRolling,
	"scale-out":       compileScale(ActScaleOut),
	"scale-in":        compileScale(ActScaleIn),
	"cut":             compileCut,
	"failover":        compileFailover,
	"work":            compileWork,
	"run":             compileRun,
}

// compile turns the lines into the typed fields.
func (s *Scenario) compile() error {
	name, lines := s.Name, s.lines
	*s = Scenario{
		Name:    name,
		lines:   lines,
		Timing:  DefaultTiming(),
		Network: Link{Delay: LogNormal{Mu: math.Log(float64(time.Millisecond)), Sigma: math.Log(5) / z99}},
		Work:    Work{InFlight: 1},
	}
	for _, l := range lines {
		spec, ok := commandSpecs[l.cmd]
		where := fmt.Sprintf("%s line %d", name, l.line)
		if l.line == 0 {
			where = name + " --set"
		}
		if !ok {
			names := make([]string, 0, len(commandSpecs))
			for k := range commandSpecs {
				names = append(names, k)
			}
			slices.Sort(names)
			return fmt.Errorf("%w: %s: unknown command %q (known: %s)", ErrScenario, where, l.cmd, strings.Join(names, ", "))
		}
		a := &argReader{line: l, where: where}
		spec(s, a)
		if a.err == nil {
			for _, arg := range l.args {
				if !a.used[arg.key] {
					a.err = fmt.Errorf("%w: %s: %s: unknown argument %q", ErrScenario, where, l.cmd, arg.key)
					break
				}
			}
		}
		if a.err != nil {
			return a.err
		}
	}
	slices.SortStableFunc(s.Actions, func(a, b Action) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	if err := s.Validate(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrScenario, name, err)
	}
	return nil
}

// argReader reads the arguments of one line, keeping the first error.
type argReader struct {
	line  cmdLine
	where string
	used  map[string]bool
	err   error
}

func (a *argReader) raw(key string) (string, bool) {
	if a.used == nil {
		a.used = map[string]bool{}
	}
	a.used[key] = true
	for _, arg := range a.line.args {
		if arg.key == key {
			return arg.val, true
		}
	}
	return "", false
}

func (a *argReader) fail(key string, format string, args ...any) {
	if a.err == nil {
		a.err = fmt.Errorf("%w: %s: %s: argument %s: %s", ErrScenario, a.where, a.line.cmd, key, fmt.Sprintf(format, args...))
	}
}

func (a *argReader) require(key string) {
	if _, ok := a.raw(key); !ok && a.err == nil {
		a.err = fmt.Errorf("%w: %s: %s: argument %s is required", ErrScenario, a.where, a.line.cmd, key)
	}
}

func (a *argReader) duration(key string, into *time.Duration) bool {
	v, ok := a.raw(key)
	if !ok {
		return false
	}
	d, err := parseNonNegDuration(v)
	if err != nil {
		a.fail(key, "%v", err)
		return false
	}
	*into = d
	return true
}

func (a *argReader) dist(key string, into *Dist) bool {
	v, ok := a.raw(key)
	if !ok {
		return false
	}
	d, err := parseDist(strings.TrimSpace(v))
	if err != nil {
		a.fail(key, "%v", err)
		return false
	}
	*into = d
	return true
}

func (a *argReader) integer(key string, into *int) bool {
	v, ok := a.raw(key)
	if !ok {
		return false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		a.fail(key, "%q is not a non-negative integer", v)
		return false
	}
	*into = n
	return true
}

func (a *argReader) prob(key string, into *float64) bool {
	v, ok := a.raw(key)
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		a.fail(key, "%q is not a probability in [0, 1]", v)
		return false
	}
	*into = f
	return true
}

func (a *argReader) fraction(key string, into *float64, below float64) bool {
	v, ok := a.raw(key)
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f < below) {
		a.fail(key, "%q is not a number in [0, %g)", v, below)
		return false
	}
	*into = f
	return true
}

func (a *argReader) boolean(key string, into *bool) bool {
	v, ok := a.raw(key)
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		a.fail(key, "%q is not true or false", v)
		return false
	}
	*into = b
	return true
}

// member reads a member name: "m3" or "3".
func (a *argReader) member(key string, into *string) bool {
	v, ok := a.raw(key)
	if !ok {
		return false
	}
	name, err := memberName(v)
	if err != nil {
		a.fail(key, "%v", err)
		return false
	}
	*into = name
	return true
}

func memberName(v string) (string, error) {
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return "m" + strconv.Itoa(n), nil
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(v, "m")); err == nil && n > 0 && strings.HasPrefix(v, "m") {
		return v, nil
	}
	if v == "coord" {
		return v, nil
	}
	return "", fmt.Errorf("%q is not a node (m1, m2, ..., or coord)", v)
}

// nodes reads a node list: "(m1,m2)" or "m1".
func (a *argReader) nodes(key string, into *[]string, allowCoord bool) bool {
	v, ok := a.raw(key)
	if !ok {
		return false
	}
	v = strings.TrimSuffix(strings.TrimPrefix(v, "("), ")")
	var out []string
	for _, f := range strings.Split(v, ",") {
		name, err := memberName(strings.TrimSpace(f))
		if err == nil && name == "coord" && !allowCoord {
			err = errors.New("the coordinator cannot be listed here")
		}
		if err != nil {
			a.fail(key, "%v", err)
			return false
		}
		out = append(out, name)
	}
	*into = out
	return true
}

func compileMembers(s *Scenario, a *argReader) {
	a.require("n")
	a.integer("n", &s.Members)
	a.boolean("static", &s.Static)
	a.dist("start", &s.StartDelay)
	if v, ok := a.raw("assignor"); ok {
		s.Assignor = v
	}
}

func compileTopic(s *Scenario, a *argReader) {
	a.require("name")
	a.require("partitions")
	t := Topic{}
	t.Name, _ = a.raw("name")
	var n int
	if a.integer("partitions", &n) {
		if n <= 0 || n > math.MaxInt32 {
			a.fail("partitions", "%d is not a positive partition count", n)
		}
		t.Partitions = int32(n)
	}
	s.Topics = append(s.Topics, t)
}

func compileTiming(s *Scenario, a *argReader) {
	t := &s.Timing
	a.duration("heartbeat", &t.HeartbeatInterval)
	a.duration("session", &t.SessionTimeout)
	a.duration("rebalance", &t.RebalanceTimeout)
	a.duration("initial-delay", &t.InitialRebalanceDelay)
	a.duration("margin", &t.Margin)
	a.fraction("drift", &t.MaxDrift, 0.5)
	a.duration("request-timeout", &t.RequestTimeout)
	a.duration("conn-grace", &t.ConnLossGrace)
	a.duration("view-settle", &t.ViewSettle)
	a.duration("keepalive", &t.KeepAlive)
	a.duration("takeover-grace", &t.TakeoverGrace)
}

func compileClocks(s *Scenario, a *argReader) {
	a.fraction("skew", &s.ClockSkew, 0.5)
}

func compileLinkArgs(l *Link, a *argReader) {
	a.dist("delay", &l.Delay)
	a.prob("loss", &l.Loss)
	a.prob("dup", &l.Dup)
	a.prob("reorder", &l.Reorder)
}

func compileNetwork(s *Scenario, a *argReader) {
	compileLinkArgs(&s.Network, a)
}

func compileLink(s *Scenario, a *argReader) {
	a.require("nodes")
	var names []string
	a.nodes("nodes", &names, false)
	l := s.Network
	compileLinkArgs(&l, a)
	if s.Links == nil {
		s.Links = map[string]Link{}
	}
	for _, n := range names {
		s.Links[n] = l
	}
}

func compilePauses(s *Scenario, a *argReader) {
	a.require("every")
	a.require("length")
	var p Pauses
	a.dist("every", &p.Every)
	a.dist("length", &p.Length)
	a.nodes("members", &p.Members, false)
	if p.Every != nil && p.Every.Quantile(0.5) <= 0 {
		a.fail("every", "the time between pauses must not be zero")
	}
	s.Pauses = append(s.Pauses, p)
}

func (a *argReader) at() time.Duration {
	a.require("at")
	var at time.Duration
	a.duration("at", &at)
	return at
}

func compilePause(s *Scenario, a *argReader) {
	act := Action{Kind: ActPause, At: a.at(), Line: a.line.line}
	a.require("member")
	a.member("member", &act.Member)
	a.require("for")
	a.duration("for", &act.Length)
	s.Actions = append(s.Actions, act)
}

func compileCrash(s *Scenario, a *argReader) {
	act := Action{Kind: ActCrash, At: a.at(), Line: a.line.line}
	a.require("member")
	a.member("member", &act.Member)
	a.dist("restart", &act.Restart)
	a.boolean("host", &act.Host)
	s.Actions = append(s.Actions, act)
}

func compileCrashes(s *Scenario, a *argReader) {
	a.require("every")
	var c Crashes
	a.dist("every", &c.Every)
	a.dist("restart", &c.Restart)
	a.boolean("host", &c.Host)
	if c.Every != nil && c.Every.Quantile(0.5) <= 0 {
		a.fail("every", "the time between crashes must not be zero")
	}
	s.Crashes = append(s.Crashes, c)
}

func compileConnDrops(s *Scenario, a *argReader) {
	a.require("every")
	a.dist("every", &s.ConnDrops)
	if s.ConnDrops != nil && s.ConnDrops.Quantile(0.5) <= 0 {
		a.fail("every", "the time between drops must not be zero")
	}
}

func compileRolling(s *Scenario, a *argReader) {
	act := Action{Kind: ActRollingRestart, At: a.at(), Surge: 1, Line: a.line.line}
	a.integer("surge", &act.Surge)
	if act.Surge < 1 {
		a.fail("surge", "must be at least 1")
	}
	a.require("every")
	a.duration("every", &act.Every)
	a.dist("restart", &act.Restart)
	s.Actions = append(s.Actions, act)
}

func compileScale(k ActionKind) func(s *Scenario, a *argReader) {
	return func(s *Scenario, a *argReader) {
		act := Action{Kind: k, At: a.at(), Line: a.line.line}
		a.require("n")
		a.integer("n", &act.N)
		s.Actions = append(s.Actions, act)
	}
}

func compileCut(s *Scenario, a *argReader) {
	act := Action{Kind: ActCut, At: a.at(), Line: a.line.line}
	a.require("nodes")
	a.nodes("nodes", &act.Nodes, true)
	a.duration("heal", &act.Heal)
	s.Actions = append(s.Actions, act)
}

func compileFailover(s *Scenario, a *argReader) {
	act := Action{Kind: ActFailover, At: a.at(), Line: a.line.line}
	a.duration("takeover", &act.Takeover)
	a.duration("ttl", &act.ElectionTTL)
	if act.Takeover != 0 && act.ElectionTTL != 0 {
		a.fail("ttl", "give takeover or ttl, not both")
	}
	s.Actions = append(s.Actions, act)
}

func compileWork(s *Scenario, a *argReader) {
	a.require("every")
	a.duration("every", &s.Work.Every)
	a.dist("start", &s.Work.Start)
	a.dist("stop", &s.Work.Stop)
	a.prob("inflight", &s.Work.InFlight)
	if s.Work.Every == 0 {
		a.fail("every", "must be positive (leave out the work line to disable work)")
	}
}

func compileRun(s *Scenario, a *argReader) {
	a.require("for")
	a.duration("for", &s.Duration)
}
