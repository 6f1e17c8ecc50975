//! A month pulse through the example job, end to end on the local servers: the pulse sweep at a
//! tenant's month end, the worker with the example's registry, one report row; the same unit run
//! again writes nothing more.

use std::time::Duration;

use tickwork::budget::Unlimited;
use tickwork::config::Env;
use tickwork::queue::{Job, Queue, QueueConfig};
use tickwork::schema::av_s;
use tickwork::tenants::Tenant;
use tickwork_example_monthly_report::{registry, reports_table};
use tickwork_lambda::Tick;
use tickwork_tests::Local;

fn ms(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

async fn rows(local: &Local, table: &str, tenant: &str) -> Vec<tickwork::capacity::Item> {
    let q = local
        .db
        .client()
        .query()
        .table_name(table)
        .key_condition_expression("pk = :t")
        .expression_attribute_values(":t", av_s(tenant));
    let mut out = Vec::new();
    tickwork::pager::for_each_page(&local.db, q, None, 100, &Unlimited, "rows", |p| {
        out.extend(p.items);
        std::future::ready(Ok::<(), tickwork::DbError>(()))
    })
    .await
    .unwrap();
    out
}

#[tokio::test]
async fn a_month_pulse_writes_one_report_per_tenant() {
    let local = Local::new().await;
    let tables = local.sweep_tables().await;
    let summaries = local.table(&queue_worker::summary::summaries_table()).await;
    let reports = local.table(&reports_table()).await;
    // Added on 30 November (Tokyo), swept at Tokyo's midnight into December: November ends.
    local.clock.set(ms("2026-11-30T03:00:00Z"));
    let cfg = pulse_sweep::PulseConfig::from_env(&Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    let sweep = pulse_sweep::Deps::new(local.fresh_db(), local.clock(), cfg, tables.clone(), 1, QueueConfig::default());
    let tenants = [Tenant::new("acme", "Asia/Tokyo"), Tenant::new("globex", "Asia/Tokyo")];
    pulse_sweep::add_tenants(&sweep, &tenants).await.unwrap();
    let at = ms("2026-11-30T15:05:00Z");
    local.clock.set(at);
    let r =
        pulse_sweep::run(&sweep, &Tick::parse(&Tick::envelope(at, false)).unwrap(), &Unlimited, "sweep").await.unwrap();
    // A tenant is owed every period that ends after it was added: November (it ended after the
    // 30th's noon), not October.
    assert_eq!(r.pulses["month"], 2, "November, for each of the two tenants: {r:?}");

    // The worker, as the example's Lambda builds it, with the example's handlers.
    let queue = Queue::new(local.fresh_db(), &tables.queue, QueueConfig::default(), local.clock());
    let (handlers, seen) =
        registry(local.fresh_db(), &summaries, &reports, local.clock(), queue_worker::summary::UTC_DAILY).counted();
    let wcfg = queue_worker::WorkerConfig::from_env(&Env::from_pairs([])).unwrap();
    let report = queue_worker::drain(&queue, &handlers, "worker", &Unlimited, &wcfg).await.unwrap();
    assert_eq!(report.units_failed, 0, "{report:?}");

    for t in ["acme", "globex"] {
        let got = rows(&local, &reports, t).await;
        let months: Vec<&str> = got.iter().map(|i| i["sk"].as_s().unwrap().as_str()).collect();
        assert_eq!(months, ["report#2026-11"], "the month it was added in, and none before");
        assert_eq!(got.len(), 1, "one report a month pulse for {t}: {got:?}");
        let nov = got.iter().find(|i| i["sk"].as_s().unwrap() == "report#2026-11").expect("November's report");
        assert_eq!(nov["days"].as_n().unwrap(), "30");
        assert_eq!(nov["unit"].as_s().unwrap(), &format!("pulse#{t}#month#2026-11"));
        // The shipped daily summary still runs for the day pulse of the same boundary.
        let days = rows(&local, &summaries, t).await;
        assert!(days.iter().any(|i| i["sk"].as_s().unwrap() == "day#2026-11-30"), "{days:?}");
    }
    assert!(seen.lock().unwrap().contains_key("pulse#acme#month#2026-11"));

    // The unit again (a crash between the put and the settle): still one row, no error.
    let payload = r#"{"tenant":"acme","grain":"month","period":"2026-11","zone":"Asia/Tokyo"}"#;
    let unit = Job {
        tenant: Some("acme".into()),
        attempts: 2,
        owner: "again".into(),
        ..Job::unclaimed("pulse#acme#month#2026-11", "pulse", payload)
    };
    let before = rows(&local, &reports, "acme").await;
    local.clock.set(at + 3_600_000);
    handlers.get("pulse").unwrap().handle(&unit).await.unwrap();
    assert_eq!(rows(&local, &reports, "acme").await, before, "written once: the row as the first run left it");
    // A unit that can never succeed is permanent (dead-lettered at once), not retried.
    let bad = Job { payload: r#"{"tenant":"acme","grain":"month","period":"2026-13"}"#.into(), ..unit };
    assert!(matches!(handlers.get("pulse").unwrap().handle(&bad).await, Err(queue_worker::HandlerError::Permanent(_))));
}

/// `docs/own-job.md` shows this crate's code as it is: the worker's `main.rs` whole, the registry
/// and the handler's `impl`, so the page cannot drift from the code it teaches.
#[test]
fn the_guide_shows_this_code_as_it_is() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("../../docs/own-job.md")).unwrap();
    let main = std::fs::read_to_string(root.join("src/main.rs")).unwrap();
    assert!(guide.contains(main.trim_end()), "docs/own-job.md does not show src/main.rs as it is");
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    for start in ["/// The worker's handlers:", "impl Handler for MonthlyReport {"] {
        let i = lib.find(start).unwrap();
        let piece = &lib[i..i + lib[i..].find("\n}\n").unwrap() + 2];
        assert!(guide.contains(piece), "docs/own-job.md does not show `{start}` as it is");
    }
}
