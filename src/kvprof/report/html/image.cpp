// cairo drawing of a Figure (see image.hpp).
#include "kvprof/report/html/image.hpp"

#include <cairo-svg.h>
#include <cairo.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>

namespace kvprof::report::html {
namespace {

struct Rgb {
  double r, g, b;
};
// A colour-blind-safe categorical palette (Okabe-Ito, then Tableau tones).
constexpr std::array<Rgb, 8> k_palette{{{0.00, 0.45, 0.70},
                                        {0.90, 0.62, 0.00},
                                        {0.00, 0.62, 0.45},
                                        {0.80, 0.47, 0.65},
                                        {0.34, 0.71, 0.91},
                                        {0.84, 0.37, 0.00},
                                        {0.47, 0.37, 0.63},
                                        {0.50, 0.50, 0.50}}};
constexpr Rgb k_capacity{0.78, 0.16, 0.16};
constexpr Rgb k_text{0.13, 0.13, 0.15};
constexpr Rgb k_muted{0.40, 0.40, 0.45};
constexpr Rgb k_grid{0.88, 0.88, 0.90};
constexpr const char* k_font = "DejaVu Sans";

Rgb color_of(int index) {
  if (index < 0) return k_capacity;
  return k_palette[static_cast<size_t>(index) % k_palette.size()];
}

void set(cairo_t* cr, Rgb c, double alpha = 1.0) {
  cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha);
}

void font(cairo_t* cr, double size, bool bold = false) {
  cairo_select_font_face(cr, k_font, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double text_width(cairo_t* cr, const std::string& s) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  return e.x_advance;
}

// Draws `s` with its anchor at (x, y): align 0 left, 0.5 centre, 1 right; y is the baseline.
void draw_text(cairo_t* cr, const std::string& s, double x, double y, double align = 0) {
  cairo_move_to(cr, x - align * text_width(cr, s), y);
  cairo_show_text(cr, s.c_str());
}

// Cuts `s` to fit `width`, ending in "...".
std::string fit(cairo_t* cr, std::string s, double width) {
  if (text_width(cr, s) <= width) return s;
  while (!s.empty() && text_width(cr, s + "...") > width)
    s.pop_back();
  return s + "...";
}

void draw(cairo_t* cr, const Figure& f, double width, double height) {
  set(cr, {1, 1, 1});
  cairo_paint(cr);
  // Title block.
  const double pad = 24;
  set(cr, k_text);
  font(cr, 21, true);
  draw_text(cr, f.title, pad, pad + 18);
  font(cr, 13);
  set(cr, k_muted);
  draw_text(cr, fit(cr, f.subtitle, width - 2 * pad), pad, pad + 42);
  draw_text(cr, fit(cr, f.natures(), width - 2 * pad), pad, pad + 61);
  // Legend on the right.
  font(cr, 13);
  double legend_w = 0;
  for (const auto& s : f.series)
    legend_w = std::max(legend_w, text_width(cr, s.name));
  for (const auto& s : f.hlines)
    legend_w = std::max(legend_w, text_width(cr, s.name));
  legend_w = std::min(legend_w + 48, width * 0.34);
  const double plot_left = pad + 78, plot_top = pad + 86;
  const double plot_right = width - pad - legend_w - 16, plot_bottom = height - pad - 58;
  const double plot_w = plot_right - plot_left, plot_h = plot_bottom - plot_top;
  // Y range from zero: memory and throughput are read against zero.
  double y_max = 0;
  for (const auto& s : f.series)
    for (double y : s.y)
      y_max = std::max(y_max, y);
  for (const auto& s : f.hlines)
    y_max = std::max(y_max, s.y.front());
  if (y_max <= 0) y_max = 1;
  const double step = nice_step(y_max * 1.08, 6);
  const double y_top = std::ceil(y_max * 1.08 / step) * step;
  const auto py = [&](double y) { return plot_bottom - y / y_top * plot_h; };
  const size_t n_cat = std::max<size_t>(1, f.categories.size());
  const auto px = [&](double x) {
    return plot_left + (x + 0.5) / static_cast<double>(n_cat) * plot_w;
  };
  // Grid and y ticks.
  cairo_set_line_width(cr, 1);
  font(cr, 13);
  for (double y = 0; y <= y_top + step / 2; y += step) {
    set(cr, k_grid);
    cairo_move_to(cr, plot_left, std::round(py(y)) + 0.5);
    cairo_line_to(cr, plot_right, std::round(py(y)) + 0.5);
    cairo_stroke(cr);
    set(cr, k_muted);
    draw_text(cr, tick_text(y, step), plot_left - 8, py(y) + 4.5, 1);
  }
  // X ticks.
  for (size_t i = 0; i < f.categories.size(); ++i) {
    const double x = px(static_cast<double>(i));
    set(cr, k_muted);
    cairo_move_to(cr, x, plot_bottom);
    cairo_line_to(cr, x, plot_bottom + 5);
    cairo_stroke(cr);
    draw_text(cr, f.categories[i], x, plot_bottom + 22, 0.5);
  }
  // Axes.
  set(cr, k_text);
  cairo_set_line_width(cr, 1.2);
  cairo_move_to(cr, plot_left, plot_top);
  cairo_line_to(cr, plot_left, plot_bottom);
  cairo_line_to(cr, plot_right, plot_bottom);
  cairo_stroke(cr);
  font(cr, 14);
  draw_text(cr, f.x_label, plot_left + plot_w / 2, plot_bottom + 46, 0.5);
  cairo_save(cr);
  cairo_translate(cr, pad + 14, plot_top + plot_h / 2);
  cairo_rotate(cr, -M_PI / 2);
  draw_text(cr, f.y_label, 0, 0, 0.5);
  cairo_restore(cr);
  if (f.series.empty()) {
    set(cr, k_muted);
    font(cr, 16);
    draw_text(cr, "no data in this run", plot_left + plot_w / 2, plot_top + plot_h / 2, 0.5);
  }
  // Horizontal lines (capacity).
  cairo_save(cr);
  cairo_rectangle(cr, plot_left, plot_top - 2, plot_w, plot_h + 4);
  cairo_clip(cr);
  for (const auto& h : f.hlines) {
    set(cr, color_of(h.color));
    cairo_set_line_width(cr, 2);
    const double dash[] = {8, 5};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, plot_left, py(h.y.front()));
    cairo_line_to(cr, plot_right, py(h.y.front()));
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    font(cr, 12);
    draw_text(cr, fmt::format("{} {:.2f}", h.name, h.y.front()), plot_right - 6,
              py(h.y.front()) - 6, 1);
  }
  // Series.
  for (const auto& s : f.series) {
    set(cr, color_of(s.color), s.dashed && !s.marker ? 0.85 : 1.0);
    cairo_set_line_width(cr, s.dashed ? 2 : 2.6);
    if (s.dashed) {
      const double dash[] = {7, 5};
      cairo_set_dash(cr, dash, 2, 0);
    }
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (i == 0) {
        cairo_move_to(cr, px(s.x[i]), py(s.y[i]));
      } else {
        cairo_line_to(cr, px(s.x[i]), py(s.y[i]));
      }
    }
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    if (s.marker) {
      for (size_t i = 0; i < s.x.size(); ++i) {
        cairo_arc(cr, px(s.x[i]), py(s.y[i]), s.dashed ? 3.5 : 4.5, 0, 2 * M_PI);
        set(cr, {1, 1, 1});
        cairo_fill_preserve(cr);
        set(cr, color_of(s.color));
        cairo_set_line_width(cr, 2);
        cairo_stroke(cr);
      }
    }
  }
  cairo_restore(cr);
  // Marks: a dotted guide down to the x axis, the point, and its label on a white backing.
  for (const auto& m : f.marks) {
    const double x = px(m.x), y = std::clamp(py(m.y), plot_top, plot_bottom);
    set(cr, color_of(m.color));
    cairo_set_line_width(cr, 1.2);
    const double dots[] = {2, 3};
    cairo_set_dash(cr, dots, 2, 0);
    cairo_move_to(cr, x, y);
    cairo_line_to(cr, x, plot_bottom);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    cairo_arc(cr, x, y, 6, 0, 2 * M_PI);
    cairo_fill(cr);
    font(cr, 13, true);
    const double w = text_width(cr, m.label);
    // Below and right of the point: the capacity lines' labels sit above their lines, and a
    // curve that crosses them is above them past the point.
    const double lx = std::max(plot_left + 4, std::min(x + 12, plot_right - w - 4));
    const double ly = std::min(plot_bottom - 8, y + 26);
    set(cr, {1, 1, 1}, 0.85);
    cairo_rectangle(cr, lx - 3, ly - 14, w + 6, 19);
    cairo_fill(cr);
    set(cr, k_text);
    draw_text(cr, m.label, lx, ly);
  }
  // Legend.
  font(cr, 13);
  double ly = plot_top + 6;
  const double lx = plot_right + 20;
  const auto legend_entry = [&](const std::string& name, Rgb c, bool dashed, bool marker) {
    set(cr, c);
    cairo_set_line_width(cr, dashed ? 2 : 2.6);
    if (dashed) {
      const double dash[] = {5, 3};
      cairo_set_dash(cr, dash, 2, 0);
    }
    cairo_move_to(cr, lx, ly);
    cairo_line_to(cr, lx + 26, ly);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    if (marker) {
      cairo_arc(cr, lx + 13, ly, 3.5, 0, 2 * M_PI);
      set(cr, {1, 1, 1});
      cairo_fill_preserve(cr);
      set(cr, c);
      cairo_set_line_width(cr, 2);
      cairo_stroke(cr);
    }
    set(cr, k_text);
    draw_text(cr, fit(cr, name, legend_w - 40), lx + 34, ly + 4.5);
    ly += 22;
  };
  for (const auto& s : f.series) {
    if (ly > plot_bottom) break;
    legend_entry(s.name, color_of(s.color), s.dashed, s.marker);
  }
  for (const auto& h : f.hlines) {
    if (ly > plot_bottom) break;
    legend_entry(h.name, color_of(h.color), true, false);
  }
}

std::string xml_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// cairo draws text as glyph outlines; puts the figures' words in <title>/<desc> after <svg ...>
// so screen readers, search and tests can read them.
Expected<void> add_svg_text(const std::string& file, std::span<const Figure> figures) {
  std::ifstream in(file, std::ios::binary);
  std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t open = svg.find("<svg");
  const size_t end = open == std::string::npos ? open : svg.find('>', open);
  if (end == std::string::npos) return fail(ErrorKind::io, "cairo wrote no <svg> element");
  std::string title, desc;
  for (const auto& f : figures) {
    title += (title.empty() ? "" : " / ") + f.title;
    desc += f.title + ". " + f.subtitle + ". x: " + f.x_label + ". y: " + f.y_label + ".";
    for (const auto& h : f.hlines)
      desc += " " + h.name + ".";
    for (const auto& m : f.marks)
      desc += " " + m.label + ".";
    desc += "\n";
  }
  svg.insert(end + 1,
             "\n<title>" + xml_escaped(title) + "</title>\n<desc>" + xml_escaped(desc) + "</desc>");
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << svg;
  if (!out.flush()) return fail(ErrorKind::io, "cannot rewrite " + file);
  return {};
}

}  // namespace

// Round tick step for a range: 1, 2, 2.5 or 5 times a power of ten, about `n` ticks.
double nice_step(double range, int n) {
  if (range <= 0) return 1;
  const double raw = range / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

std::string tick_text(double v, double step) {
  // As many decimals as the step itself has (0.25 needs two, 2.5 one): every label exact.
  int decimals = 0;
  for (double scaled = step; decimals < 6; ++decimals, scaled *= 10) {
    if (std::fabs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) break;
  }
  return fmt::format("{:.{}f}", v, decimals);
}

Expected<void> write_figure(const Figure& figure, const std::filesystem::path& path,
                            ImageFormat format, int width, int height) {
  return write_figures(std::span<const Figure>(&figure, 1), path, format, width, height);
}

Expected<void> write_figures(std::span<const Figure> figures, const std::filesystem::path& path,
                             ImageFormat format, int width, int height) {
  const std::string tmp = path.string() + ".tmp";
  const int total_height = height * static_cast<int>(std::max<size_t>(1, figures.size()));
  cairo_surface_t* surface = nullptr;
  if (format == ImageFormat::svg) {
    surface = cairo_svg_surface_create(tmp.c_str(), width, total_height);
  } else {
    surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width * 2, total_height * 2);
  }
  std::unique_ptr<cairo_surface_t, void (*)(cairo_surface_t*)> owned(surface,
                                                                     &cairo_surface_destroy);
  if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
    return fail(ErrorKind::io, fmt::format("cannot write '{}': {}", path.string(),
                                           cairo_status_to_string(cairo_surface_status(surface))));
  }
  cairo_t* cr = cairo_create(surface);
  if (format == ImageFormat::png) cairo_scale(cr, 2, 2);
  for (size_t i = 0; i < figures.size(); ++i) {
    cairo_save(cr);
    cairo_translate(cr, 0, static_cast<double>(i) * height);
    cairo_rectangle(cr, 0, 0, width, height);
    cairo_clip(cr);
    draw(cr, figures[i], width, height);
    cairo_restore(cr);
  }
  const cairo_status_t drawn = cairo_status(cr);
  cairo_destroy(cr);
  cairo_status_t status = drawn;
  if (status == CAIRO_STATUS_SUCCESS && format == ImageFormat::png) {
    status = cairo_surface_write_to_png(surface, tmp.c_str());
  }
  cairo_surface_finish(surface);
  if (status == CAIRO_STATUS_SUCCESS) status = cairo_surface_status(surface);
  owned.reset();
  std::error_code ec;
  if (status != CAIRO_STATUS_SUCCESS) {
    std::filesystem::remove(tmp, ec);
    return fail(ErrorKind::io, fmt::format("cannot write '{}': {}", path.string(),
                                           cairo_status_to_string(status)));
  }
  if (format == ImageFormat::svg) {
    if (auto ok = add_svg_text(tmp, figures); !ok) {
      std::filesystem::remove(tmp, ec);
      return fail(ErrorKind::io,
                  fmt::format("cannot write '{}': {}", path.string(), ok.error().message));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return fail(ErrorKind::io, fmt::format("cannot write '{}': {}", path.string(), ec.message()));
  return {};
}

}  // namespace kvprof::report::html
