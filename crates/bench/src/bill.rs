//! The month's bill per service at 1,000, 100,000 and 10 million tenants, for tickwork, the
//! `000_*` design and one EventBridge Scheduler schedule per tenant: a table on stdout and an
//! SVG chart (`docs/bill.svg`, shown in the README).

use anyhow::{Context, Result};
use plotters::prelude::*;
use tickctl::bill::{at_scales, AtScale, Prices, Stack, SERVICES};
use tickctl::cost::CostInput;

const SCALES: [u64; 3] = [1_000, 100_000, 10_000_000];
/// Modelled in full at these sizes; every scale is a straight line through them, per service.
const MODELLED: (usize, usize) = (1_000, 4_000);

pub fn run(svg: &str) -> Result<()> {
    println!(
        "== The bill: US dollars a month per service (prices in crates/cost/src/bill/prices.rs; tickwork modelled at {} and {} tenants, each service a straight line through them) ==",
        MODELLED.0, MODELLED.1
    );
    let rows = at_scales(&CostInput::deployed(MODELLED.0), MODELLED, &SCALES, &Stack::default(), &Prices::default())?;
    println!("{:<12} {:<28} {}", "tenants", "design", SERVICES.map(|s| format!("{s:>12}")).join(""));
    for r in &rows {
        let line = |name: &str, v: &[f64]| {
            let total: f64 = v.iter().sum();
            println!(
                "{:<12} {:<28} {}  total {:>10.2}",
                r.tenants,
                name,
                v.iter().map(|x| format!("{x:>12.2}")).collect::<String>(),
                total
            );
        };
        line("tickwork", &r.tickwork);
        let mut before = vec![0.0; SERVICES.len()];
        before[0] = r.before_dynamodb;
        line("000_* (its DynamoDB only)", &before);
        line("Scheduler, one per tenant", &r.scheduler);
    }
    draw(svg, &rows)?;
    println!("chart: {svg}\n");
    Ok(())
}

/// Grouped bars, one group per scale, one bar per design, stacked by service, on a log scale
/// (the three scales span four orders of magnitude). Stacking on a log axis: each segment is
/// drawn from the running total before it to the total after it, so the bar's top is the total.
fn draw(path: &str, rows: &[AtScale]) -> Result<()> {
    let colors = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
    ];
    let designs = ["tickwork", "000_*", "Scheduler"];
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE).context("chart background")?;
    let max = rows
        .iter()
        .flat_map(|r| [r.tickwork.iter().sum::<f64>(), r.before_dynamodb, r.scheduler.iter().sum::<f64>()])
        .fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Monthly bill by service (USD, log scale): tickwork; the 000_* design (its DynamoDB); one EventBridge Scheduler schedule per tenant",
            ("sans-serif", 15),
        )
        .margin(16)
        .x_label_area_size(8)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..(rows.len() as f64 * 4.0 + 1.5), (0.01f64..max * 12.0).log_scale())
        .context("chart axes")?;
    chart.configure_mesh().disable_x_mesh().x_labels(0).y_desc("USD a month").draw().context("chart mesh")?;
    for (i, r) in rows.iter().enumerate() {
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{} tenants", r.tenants),
                (i as f64 * 4.0 + 0.6, max * 5.0),
                ("sans-serif", 14).into_font(),
            )))
            .context("scale label")?;
        let before = {
            let mut v = vec![0.0; SERVICES.len()];
            v[0] = r.before_dynamodb;
            v
        };
        for (d, parts) in [&r.tickwork, &before, &r.scheduler].into_iter().enumerate() {
            let x0 = i as f64 * 4.0 + d as f64 + 0.1;
            let mut low = 0.01f64;
            for (s, v) in parts.iter().enumerate() {
                if *v <= 0.0 {
                    continue;
                }
                let high = (low + v).max(0.01);
                chart
                    .draw_series(std::iter::once(Rectangle::new([(x0, low), (x0 + 0.8, high)], colors[s].filled())))
                    .context("bar")?;
                low = high;
            }
            chart
                .draw_series(std::iter::once(Text::new(
                    designs[d].to_string(),
                    (x0, low * 1.4),
                    ("sans-serif", 11).into_font(),
                )))
                .context("label")?;
        }
    }
    for (s, name) in SERVICES.iter().enumerate() {
        chart
            .draw_series(std::iter::once(Rectangle::new([(0.0, 0.01), (0.0, 0.01)], colors[s].filled())))
            .context("legend")?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colors[s].filled()));
    }
    tickwork_sim::chart::legend(&mut chart, SeriesLabelPosition::MiddleRight)?;
    root.present().context("write the chart")?;
    Ok(())
}
