//! The run as pictures (SVG, plotters): requests per simulated hour, whose flat floor is the idle
//! tick and whose spikes are zones' local midnights, and pulses per hour by grain. `make run`
//! writes them into `docs/`, where the README shows them.

use std::path::Path;

use anyhow::{Context, Result};
use plotters::coord::CoordTranslate;
use plotters::prelude::*;

use crate::{SimConfig, SimReport};

const SWEEP: RGBColor = RGBColor(31, 119, 180);
const WORKER: RGBColor = RGBColor(255, 127, 14);
const GRAINS: [(&str, RGBColor); 5] = [
    ("day", RGBColor(31, 119, 180)),
    ("week", RGBColor(44, 160, 44)),
    ("month", RGBColor(214, 39, 40)),
    ("quarter", RGBColor(148, 103, 189)),
    ("year", RGBColor(140, 86, 75)),
];

/// The legend every chart of the project draws (the run's and the bench's): boxed, on white.
pub fn legend<'a, DB, CT>(chart: &mut ChartContext<'a, DB, CT>, at: SeriesLabelPosition) -> Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(at)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .draw()
        .context("legend")?;
    Ok(())
}

/// Hours the run covers, a partial last hour included.
fn hours(cfg: &SimConfig) -> u64 {
    let ms = cfg.ticks.map(|t| t as i64 * cfg.tick_ms).unwrap_or(i64::from(cfg.days) * 86_400_000);
    ((ms + 3_599_999) / 3_600_000).max(1) as u64
}

fn start(cfg: &SimConfig) -> String {
    jiff::Timestamp::from_millisecond(cfg.start_ms)
        .map(|t| t.strftime("%Y-%m-%d %H:%MZ").to_string())
        .unwrap_or_default()
}

/// Requests per simulated hour, sweep and queue worker, on a log scale (an idle hour is a few
/// reads; a zone's midnight is hundreds of requests). An hour without requests is drawn at 1,
/// the axis's floor.
pub fn requests_per_hour(r: &SimReport, cfg: &SimConfig, path: &Path) -> Result<()> {
    let n = hours(cfg);
    let max = r.requests_by_hour.values().map(|(s, w)| s.max(w)).copied().max().unwrap_or(1).max(1) as f64;
    let root = SVGBackend::new(path, (960, 420)).into_drawing_area();
    root.fill(&WHITE).context("chart background")?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "DynamoDB requests per simulated hour: {} tenants in {} zones, {} sweep worker(s), from {}",
                r.tenants,
                crate::ZONES.len().min(r.tenants),
                cfg.workers,
                start(cfg)
            ),
            ("sans-serif", 15),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0u64..n, (0.8f64..max * 2.0).log_scale())
        .context("chart axes")?;
    chart
        .configure_mesh()
        .x_desc("simulated hour (UTC)")
        .y_desc("requests (log)")
        .x_labels((n / 6).clamp(4, 24) as usize)
        .draw()
        .context("chart mesh")?;
    for (name, color, pick) in [
        ("pulse sweep", SWEEP, (|v: &(u64, u64)| v.0) as fn(&(u64, u64)) -> u64),
        ("queue worker", WORKER, |v: &(u64, u64)| v.1),
    ] {
        let points: Vec<(u64, f64)> =
            (0..n).map(|h| (h, r.requests_by_hour.get(&h).map(pick).unwrap_or(0).max(1) as f64)).collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .context("series")?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Pulses the sweep enqueued per simulated hour, one bar series per grain: each zone's midnight
/// pulses its tenants' day, and on month, quarter and year ends those too.
pub fn pulses_per_hour(r: &SimReport, cfg: &SimConfig, path: &Path) -> Result<()> {
    let n = hours(cfg);
    let max = (0..n)
        .map(|h| r.pulses_by_hour.values().map(|m| m.get(&h).copied().unwrap_or(0)).max().unwrap_or(0))
        .max()
        .unwrap_or(1)
        .max(1);
    let root = SVGBackend::new(path, (960, 420)).into_drawing_area();
    root.fill(&WHITE).context("chart background")?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("Pulses enqueued per simulated hour, by grain, from {}", start(cfg)), ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..n as f64, 0u64..max + max / 10 + 1)
        .context("chart axes")?;
    chart
        .configure_mesh()
        .x_desc("simulated hour (UTC)")
        .y_desc("pulses")
        .x_labels((n / 6).clamp(4, 24) as usize)
        .draw()
        .context("chart mesh")?;
    let width = 1.0 / GRAINS.len() as f64;
    for (i, (grain, color)) in GRAINS.iter().enumerate() {
        let Some(by_hour) = r.pulses_by_hour.get(*grain) else { continue };
        let color = *color;
        chart
            .draw_series(by_hour.iter().map(|(h, v)| {
                let x0 = *h as f64 + i as f64 * width;
                Rectangle::new([(x0, 0), (x0 + width, *v)], color.filled())
            }))
            .context("bars")?
            .label(*grain)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
