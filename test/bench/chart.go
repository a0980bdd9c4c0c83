package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"sort"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

var (
	white = color.RGBA{255, 255, 255, 255}
	black = color.RGBA{20, 20, 20, 255}
	grey  = color.RGBA{200, 200, 200, 255}
	blue  = color.RGBA{52, 101, 164, 255}
)

func text(img *image.RGBA, x, y int, s string) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(black), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func rect(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	draw.Draw(img, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Src)
}

// horizontalBars renders one bar per label, with its value printed, under a title.
func horizontalBars(title string, labels []string, values []float64, format string) *image.RGBA {
	const width, labelW, barH, gap, top = 900, 300, 18, 6, 40
	height := top + len(labels)*(barH+gap) + 20
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	rect(img, 0, 0, width, height, white)
	text(img, 10, 22, title)
	maxV := 0.0
	for _, v := range values {
		maxV = max(maxV, v)
	}
	if maxV == 0 {
		maxV = 1
	}
	plotW := width - labelW - 90
	for i, l := range labels {
		y := top + i*(barH+gap)
		text(img, 10, y+barH-4, l)
		w := int(values[i] / maxV * float64(plotW))
		rect(img, labelW, y, labelW+max(w, 1), y+barH, blue)
		text(img, labelW+w+6, y+barH-4, fmt.Sprintf(format, values[i]))
	}
	return img
}

// histogram renders the distribution of durations in buckets, with percentiles marked.
func histogram(title string, ds []time.Duration, buckets int, marks map[string]time.Duration) *image.RGBA {
	const width, height, left, bottom, top = 900, 360, 60, 50, 40
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	rect(img, 0, 0, width, height, white)
	text(img, 10, 22, title)
	if len(ds) == 0 {
		return img
	}
	maxD := ds[len(ds)-1]
	if maxD <= 0 {
		maxD = time.Second
	}
	counts := make([]int, buckets)
	for _, d := range ds {
		i := min(int(float64(d)/float64(maxD)*float64(buckets)), buckets-1)
		counts[i]++
	}
	maxC := 1
	for _, c := range counts {
		maxC = max(maxC, c)
	}
	plotW, plotH := width-left-20, height-top-bottom
	rect(img, left, top+plotH, left+plotW, top+plotH+1, black)
	bw := plotW / buckets
	for i, c := range counts {
		h := c * plotH / maxC
		rect(img, left+i*bw+1, top+plotH-h, left+(i+1)*bw-1, top+plotH, blue)
	}
	names := make([]string, 0, len(marks))
	for name := range marks {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		d := marks[name]
		x := left + int(float64(d)/float64(maxD)*float64(plotW))
		rect(img, x, top, x+1, top+plotH, grey)
		// Labels to the left of their line, one row each, so that close marks stay readable.
		label := fmt.Sprintf("%s %s", name, d.Round(100*time.Millisecond))
		text(img, max(left, x-7*len(label)-4), top+14+16*i, label)
	}
	text(img, left, height-20, "0")
	text(img, left+plotW-60, height-20, maxD.Round(100*time.Millisecond).String())
	text(img, left+plotW/2-60, height-20, "time from create to Ready")
	text(img, 5, top+10, fmt.Sprintf("%d", maxC))
	return img
}

func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
