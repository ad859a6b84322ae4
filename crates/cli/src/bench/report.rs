//! How every `tessera bench` reports: a table on stdout, a JSON file with every row plus a
//! `summary` object of headline figures, and a PNG plot. One place, so all benches look alike.

use std::fs;
use std::path::{Path, PathBuf};

use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use serde_json::{json, Map, Value};

/// One bench run's results.
pub struct Report {
    pub bench: String,
    /// Every parameter of the run, echoed so a result can be reproduced.
    pub params: Map<String, Value>,
    pub rows: Vec<Map<String, Value>>,
    pub summary: Map<String, Value>,
}

/// The run's one spinner, on a terminal only (hidden when stderr is not one): the time taken
/// and the last row measured, so a bench of minutes shows it is moving. One for the process,
/// because a bench fills reports of its parts while its own is open.
fn progress() -> &'static ProgressBar {
    static BAR: OnceLock<ProgressBar> = OnceLock::new();
    BAR.get_or_init(|| {
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} bench {prefix} {elapsed}: {wide_msg}") {
            bar.set_style(style);
        }
        bar.set_message("starting");
        bar.enable_steady_tick(Duration::from_millis(250));
        bar
    })
}

/// Where to write a report: `--json FILE` wins for the JSON; the PNG goes beside it (or into
/// `--out DIR`).
#[derive(Clone, Debug)]
pub struct OutputPaths {
    pub json: PathBuf,
    pub png: PathBuf,
}

impl OutputPaths {
    pub fn resolve(bench: &str, json: Option<&Path>, out_dir: &Path) -> Self {
        match json {
            Some(j) => OutputPaths { json: j.to_path_buf(), png: j.with_extension("png") },
            None => OutputPaths {
                json: out_dir.join(format!("{bench}.json")),
                png: out_dir.join(format!("{bench}.png")),
            },
        }
    }
}

impl Report {
    pub fn new(bench: &str) -> Self {
        progress().set_prefix(bench.to_string());
        Report { bench: bench.to_string(), params: Map::new(), rows: Vec::new(), summary: Map::new() }
    }

    pub fn param(&mut self, key: &str, value: impl Into<Value>) {
        self.params.insert(key.to_string(), value.into());
    }

    pub fn row(&mut self, row: Value) {
        if let Value::Object(m) = row {
            // What names the row (its strings) first, then its figures; the terminal's width
            // cuts the rest.
            let (names, figures): (Vec<_>, Vec<_>) = m.iter().partition(|(_, v)| v.is_string());
            let shown: Vec<String> = names.iter().chain(&figures).map(|(k, v)| format!("{k}={}", format_cell(v))).collect();
            progress().set_message(format!("{} rows; last: {}", self.rows.len() + 1, shown.join(" ")));
            self.rows.push(m);
        }
    }

    pub fn summary(&mut self, key: &str, value: impl Into<Value>) {
        self.summary.insert(key.to_string(), value.into());
    }

    /// Prints the rows as an aligned table with the given columns (missing cells print "-").
    pub fn print_table(&self, title: &str, columns: &[&str]) {
        self.print_table_where(title, columns, |_| true);
    }

    /// Like [`Report::print_table`], for the rows `keep` accepts (a report with several sweeps
    /// prints one table per sweep).
    pub fn print_table_where(&self, title: &str, columns: &[&str], keep: impl Fn(&Map<String, Value>) -> bool) {
        // Tables come at the end of a run: the spinner's line goes first.
        progress().finish_and_clear();
        println!("\n{title}");
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .filter(|r| keep(r))
            .map(|r| columns.iter().map(|c| r.get(*c).map(format_cell).unwrap_or_else(|| "-".into())).collect())
            .collect();
        let widths: Vec<usize> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| cells.iter().map(|r| r[i].len()).chain([c.len()]).max().unwrap_or(0))
            .collect();
        let line = |vals: Vec<String>| {
            vals.iter().zip(&widths).map(|(v, w)| format!("{v:>w$}")).collect::<Vec<_>>().join("  ")
        };
        println!("{}", line(columns.iter().map(|c| c.to_string()).collect()));
        for r in cells {
            println!("{}", line(r));
        }
    }

    pub fn print_summary(&self) {
        println!("\nsummary:");
        for (k, v) in &self.summary {
            println!("  {k:<36} {}", format_cell(v));
        }
    }

    pub fn write_json(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let doc = json!({
            "bench": self.bench,
            "params": self.params,
            "rows": self.rows,
            "summary": self.summary,
        });
        fs::write(path, serde_json::to_vec_pretty(&doc)?).with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }
}

fn format_cell(v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => {
                if f.abs() >= 100.0 {
                    format!("{f:.0}")
                } else if f.abs() >= 1.0 {
                    format!("{f:.2}")
                } else {
                    format!("{f:.3}")
                }
            }
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A named line of (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Axis description for [`plot_lines`].
pub struct Axes<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub log_x: bool,
    pub log_y: bool,
}

/// Draws line series with markers into a PNG.
pub fn plot_lines(path: &Path, axes: &Axes<'_>, series: &[Series]) -> Result<()> {
    plot_panels(path, &[(axes, series)])
}

/// Draws several charts one above the other into one PNG (one bench, several sweeps).
pub fn plot_panels(path: &Path, panels: &[(&Axes<'_>, &[Series])]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)?;
    }
    anyhow::ensure!(!panels.is_empty(), "nothing to plot");
    let root = BitMapBackend::new(path, (1000, 640 * panels.len() as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, (axes, series)) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
        draw_chart(area, axes, series)?;
    }
    root.present().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn draw_chart(area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>, axes: &Axes<'_>, series: &[Series]) -> Result<()> {
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.points.iter().copied()).collect();
    anyhow::ensure!(!all.is_empty(), "nothing to plot in {:?}", axes.title);
    let (mut x0, mut x1) = bounds(all.iter().map(|p| p.0));
    let (mut y0, mut y1) = bounds(all.iter().map(|p| p.1));
    if !axes.log_y {
        y0 = y0.min(0.0);
    }
    pad(&mut x0, &mut x1, axes.log_x);
    pad(&mut y0, &mut y1, axes.log_y);
    macro_rules! draw {
        ($xr:expr, $yr:expr) => {{
            let mut chart = ChartBuilder::on(area)
                .caption(axes.title, ("sans-serif", 22))
                .margin(16)
                .x_label_area_size(48)
                .y_label_area_size(72)
                .build_cartesian_2d($xr, $yr)?;
            chart
                .configure_mesh()
                .x_desc(axes.x_label)
                .y_desc(axes.y_label)
                .x_label_formatter(&|v| human(*v))
                .y_label_formatter(&|v| human(*v))
                .draw()?;
            for (i, s) in series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))?
                    .label(s.name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
                chart.draw_series(s.points.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()?;
        }};
    }
    match (axes.log_x, axes.log_y) {
        (true, true) => draw!((x0..x1).log_scale(), (y0..y1).log_scale()),
        (true, false) => draw!((x0..x1).log_scale(), y0..y1),
        (false, true) => draw!(x0..x1, (y0..y1).log_scale()),
        (false, false) => draw!(x0..x1, y0..y1),
    }
    Ok(())
}

fn bounds(v: impl Iterator<Item = f64>) -> (f64, f64) {
    v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)))
}

fn pad(lo: &mut f64, hi: &mut f64, log: bool) {
    if log {
        *lo = (*lo / 1.5).max(f64::MIN_POSITIVE);
        *hi *= 1.5;
    } else {
        let span = (*hi - *lo).abs().max(1e-9);
        *hi += span * 0.08;
        if *lo > 0.0 {
            *lo = (*lo - span * 0.08).max(0.0);
        }
    }
}

/// Compact axis labels: 4096 -> "4K", 16777216 -> "16M".
fn human(v: f64) -> String {
    let a = v.abs();
    if a >= 1024.0 * 1024.0 * 1024.0 && (a / 1073741824.0).fract() == 0.0 {
        format!("{}G", v / 1073741824.0)
    } else if a >= 1024.0 * 1024.0 && (a / 1048576.0).fract() == 0.0 {
        format!("{}M", v / 1048576.0)
    } else if a >= 1024.0 && (a / 1024.0).fract() == 0.0 {
        format!("{}K", v / 1024.0)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Percentile of already-sorted samples (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_picks_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 51.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
    }

    #[test]
    fn report_writes_json_and_png() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Report::new("t");
        r.row(json!({"size": 4096, "mib_s": 12.5}));
        r.summary("x", 1.5);
        let paths = OutputPaths::resolve("t", None, dir.path());
        r.write_json(&paths.json).unwrap();
        let doc: Value = serde_json::from_slice(&fs::read(&paths.json).unwrap()).unwrap();
        assert_eq!(doc["summary"]["x"], 1.5);
        assert_eq!(doc["rows"][0]["size"], 4096);
        let axes = Axes { title: "t", x_label: "x", y_label: "y", log_x: true, log_y: false };
        plot_lines(&paths.png, &axes, &[Series { name: "a".into(), points: vec![(1.0, 2.0), (1024.0, 3.0)] }]).unwrap();
        let png = fs::read(&paths.png).unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }
}
