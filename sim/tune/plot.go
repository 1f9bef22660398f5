package tune

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot draws the search to path (the extension picks the format: .svg,
// .png or .pdf): unowned partition-seconds per hour against false
// expulsions per member-day, one point per candidate, each point's size
// growing with the heartbeats per second it costs. Candidates screened on
// few seeds are grey; finalists are blue, those on the Pareto front dark
// blue; the defaults are black triangles and the recommendation a red
// square, labelled.
func (o *Outcome) Plot(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg", ".png", ".pdf":
	default:
		return fmt.Errorf("tune: plot %s: want a .svg, .png or .pdf file", path)
	}
	p := plot.New()
	p.Title.Text = "tenure tune: " + strings.Join(o.Scenarios, ", ")
	p.X.Label.Text = "unowned partition-seconds per hour"
	p.Y.Label.Text = "false expulsions per member-day"
	p.Add(plotter.NewGrid())

	maxHB, maxY := 0.0, 0.0
	for _, r := range o.Results {
		maxHB = math.Max(maxHB, r.Heartbeats.Mean)
	}
	size := func(r *Result) vg.Length {
		if maxHB <= 0 {
			return 2
		}
		return vg.Points(2 + 6*math.Sqrt(r.Heartbeats.Mean/maxHB))
	}
	layer := func(rs []*Result, c color.Color, shape draw.GlyphDrawer, legend string) error {
		if len(rs) == 0 {
			return nil
		}
		xys := make(plotter.XYs, len(rs))
		for i, r := range rs {
			xys[i].X, xys[i].Y = r.Unowned.Mean, r.FalseExpulsions.Mean
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		s.GlyphStyleFunc = func(i int) draw.GlyphStyle {
			return draw.GlyphStyle{Color: c, Radius: size(rs[i]), Shape: shape}
		}
		s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(4), Shape: shape} // the legend's
		maxY = math.Max(maxY, slices.MaxFunc(rs, func(a, b *Result) int {
			return cmp.Compare(a.FalseExpulsions.Mean, b.FalseExpulsions.Mean)
		}).FalseExpulsions.Mean)
		p.Add(s)
		p.Legend.Add(legend, s)
		return nil
	}
	var screened, finals, front []*Result
	for _, r := range o.Results {
		switch {
		case r.OnFront:
			front = append(front, r)
		case r.Finalist:
			finals = append(finals, r)
		default:
			screened = append(screened, r)
		}
	}
	grey := color.RGBA{R: 170, G: 170, B: 170, A: 255}
	blue := color.RGBA{R: 90, G: 140, B: 230, A: 255}
	dark := color.RGBA{R: 20, G: 40, B: 140, A: 255}
	red := color.RGBA{R: 220, G: 30, B: 30, A: 255}
	if err := layer(screened, grey, draw.CircleGlyph{}, "screened"); err != nil {
		return err
	}
	if err := layer(finals, blue, draw.CircleGlyph{}, fmt.Sprintf("finalists (%d seeds)", o.Seeds)); err != nil {
		return err
	}
	if err := layer(front, dark, draw.CircleGlyph{}, "Pareto front"); err != nil {
		return err
	}
	if err := layer([]*Result{o.Kafka, o.Default}, color.Black, draw.TriangleGlyph{}, "defaults"); err != nil {
		return err
	}
	var marked []*Result
	var names []string
	if o.Best != nil {
		if err := layer([]*Result{o.Best}, red, draw.BoxGlyph{}, "recommended"); err != nil {
			return err
		}
		marked, names = append(marked, o.Best), append(names, "recommended: "+shortName(o.Best.Candidate))
	}
	marked, names = append(marked, o.Kafka, o.Default), append(names, "kafka defaults", "tenure defaults")
	xys := make(plotter.XYs, len(marked))
	for i, r := range marked {
		xys[i].X, xys[i].Y = r.Unowned.Mean, r.FalseExpulsions.Mean
	}
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: names})
	if err != nil {
		return err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].XAlign = draw.XLeft
		labels.TextStyle[i].Font.Size = vg.Points(8)
	}
	labels.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(2)}
	p.Add(labels)
	p.Legend.Top = true
	p.Legend.Add("larger: more heartbeats/s")
	// Room above the points for the legend.
	p.Y.Min = 0
	p.Y.Max = math.Max(1, maxY*1.35)
	return p.Save(9*vg.Inch, 6*vg.Inch, path)
}

// shortName renders a candidate in a few words for a plot label.
func shortName(c Candidate) string {
	t := c.Timing
	s := fmt.Sprintf("hb %v, session %v", t.HeartbeatInterval, t.SessionTimeout)
	if c.Static {
		s += ", static"
	}
	return s
}
