//! The promises, checked against what the stores hold after a seed has settled.

use std::collections::{BTreeMap, BTreeSet};

use tickwork::clock::Millis;
use tickwork::schema::get_s;

use super::expect;
use super::world::{World, ARCHIVE_AGE};

/// Every item of `table`, by a paginated Scan (tooling: product code never scans).
async fn scan(w: &World, table: &str) -> Vec<tickwork::capacity::Item> {
    tickwork_sim::scan_all(&w.local.db, table).await.expect("scan")
}

fn fail(w: &mut World, v: String) {
    w.report.violations.push(v);
}

/// All the checks; `end` is the last sweep tick's time.
pub async fn check(w: &mut World, end: Millis) {
    let queue = scan(w, &w.queue.clone()).await;
    let control = scan(w, &w.control.clone()).await;
    let summaries = scan(w, &w.summaries.clone()).await;
    let tenant_items = scan(w, &w.tenants_table.clone()).await;
    let deliveries = w.deliveries.lock().expect("deliveries").clone();
    if let Ok(z) = std::env::var("CHAOS_DUMP") {
        for (name, items) in [("control", &control), ("queue", &queue), ("tenants", &tenant_items)] {
            for i in items.iter() {
                let s = format!("{i:?}");
                if s.contains(&z) {
                    eprintln!("DUMP {name}: {}", s.chars().take(1500).collect::<String>());
                }
            }
        }
    }

    // 1. Every owed (tenant, grain, period) has its effect, once (the ledger's conditional put),
    //    and nothing else has one.
    let mut got: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    for item in &summaries {
        if let Some(rest) = get_s(item, "sk").and_then(|sk| sk.strip_prefix("ledger#")) {
            let (grain, period) = rest.split_once('#').unwrap_or_default();
            got.entry(get_s(item, "pk").unwrap_or_default().to_string())
                .or_default()
                .insert((grain.to_string(), period.to_string()));
        }
    }
    for (id, life) in w.tenants.clone() {
        let want = expect::owed(life.since, &life.first_zone, end, &life.zone);
        let mut allowed = want.clone();
        for (zone, left_at) in &life.left {
            allowed.extend(expect::owed(life.since, &life.first_zone, *left_at, zone));
        }
        let have = got.remove(&id).unwrap_or_default();
        w.report.checks += want.len() as u64 + 1;
        let missing: Vec<_> = want.difference(&have).collect();
        let extra: Vec<_> = have.difference(&allowed).collect();
        if !missing.is_empty() {
            fail(w, format!("tenant {id} ({} → {}): owed and not pulsed {missing:?}", life.first_zone, life.zone));
        }
        if !extra.is_empty() {
            fail(w, format!("tenant {id} ({} → {}): pulsed and not owed {extra:?}", life.first_zone, life.zone));
        }
    }
    for (id, _) in got {
        fail(w, format!("pulses for unknown tenant {id}"));
    }
    // A unit run more than once (a batch run again after a worker crashed, a lost finish) is the
    // handlers' idempotency at work; counted, not a violation.
    let again = deliveries.values().filter(|n| **n > 1).count() as u64;
    if again > 0 {
        *w.report.events.entry("units run again (idempotent effect)".into()).or_default() += again;
    }

    // 2. No watermark ahead of a tenant: a group marked done for D has every tenant that follows
    //    it pulsed through D - 1.
    let marks: BTreeMap<String, String> = control
        .iter()
        .filter(|i| get_s(i, "pk") == Some("wm#pulse-sweep"))
        .flat_map(|i| {
            i.iter()
                .filter_map(|(k, v)| Some((k.strip_prefix("mark:")?.to_string(), v.as_s().ok()?.clone())))
                .collect::<Vec<_>>()
        })
        .collect();
    let day_done: BTreeMap<String, String> = summaries
        .iter()
        .filter_map(|i| {
            let day = get_s(i, "sk")?.strip_prefix("ledger#day#")?;
            Some((get_s(i, "pk")?.to_string(), day.to_string()))
        })
        .fold(BTreeMap::new(), |mut m, (t, d)| {
            let e = m.entry(t).or_insert_with(String::new);
            if d > *e {
                *e = d;
            }
            m
        });
    for item in &tenant_items {
        let id = get_s(item, "pk").unwrap_or_default().to_string();
        if get_s(item, "pos").is_some() || get_s(item, "status") != Some("active") {
            continue;
        }
        let zone = get_s(item, "zone").unwrap_or_default();
        let Some(mark) = marks.get(zone) else { continue };
        let d: jiff::civil::Date = mark.parse().expect("a date mark");
        let want = d.yesterday().expect("a date").to_string();
        // Only a tenant owed the day before the mark: one added before it ended (in the zone it
        // was added in; a tenant added east of here, on a later date, and moved here is not).
        if let Some(life) = w.tenants.get(&id) {
            if !expect::owed(life.since, &life.first_zone, end, &life.zone).contains(&("day".into(), want.clone())) {
                continue;
            }
        }
        w.report.checks += 1;
        if day_done.get(&id).is_none_or(|c| *c < want) {
            fail(w, format!("watermark {zone}={mark} is ahead of tenant {id} (last day {:?})", day_done.get(&id)));
        }
    }

    // 3. Every queue item finished or dead-lettered; every summary row from a completed unit and
    //    every completed unit with its row.
    for item in &queue {
        let id = get_s(item, "pk").unwrap_or_default().to_string();
        if id.starts_with(tickwork::queue::PAUSE_PREFIX) {
            continue;
        }
        w.report.checks += 1;
        match get_s(item, "state").unwrap_or_default() {
            "done" => {}
            // A throttle spends no attempt: a unit dead-lettered by throttles lost its delivery to
            // the target's rate, which these schedules never hold long enough to justify.
            "dead" if get_s(item, "last_error").is_some_and(|e| e.contains("throttled")) => {
                fail(w, format!("queue item {id} was dead-lettered by throttles: {:?}", get_s(item, "last_error")))
            }
            "dead" => *w.report.events.entry("items dead-lettered (workers died)".into()).or_default() += 1,
            other => fail(w, format!("queue item {id} left `{other}` after the stack settled")),
        }
    }
    let rows: BTreeSet<(String, String)> = summaries
        .iter()
        .filter_map(|i| Some((get_s(i, "pk")?.to_string(), get_s(i, "sk")?.to_string())))
        .filter(|(_, sk)| !sk.starts_with("ledger#"))
        .collect();
    let mut done_rows = BTreeSet::new();
    for key in deliveries.keys() {
        match key.split('#').collect::<Vec<_>>()[..] {
            ["pulse", tenant, "day", period] => {
                done_rows.insert((tenant.to_string(), format!("day#{period}")));
            }
            ["utc-daily", tenant, window] => {
                done_rows.insert((tenant.to_string(), format!("utc#{window}")));
            }
            // The shipped `sched` handler's row: `sched#<name>#<occurrence>` under the tenant.
            ["sched", tenant, name, occurrence] => {
                done_rows.insert((tenant.to_string(), format!("sched#{name}#{occurrence}")));
            }
            _ => {}
        }
    }
    w.report.checks += done_rows.len() as u64;
    for r in done_rows.difference(&rows).collect::<Vec<_>>() {
        fail(w, format!("completed unit without its summary row {r:?}"));
    }
    let dead_units: BTreeSet<String> = queue
        .iter()
        .filter(|i| get_s(i, "state") == Some("dead"))
        .flat_map(|i| {
            let job = tickwork::queue::Job::unclaimed(
                get_s(i, "pk").unwrap_or_default().to_string(),
                get_s(i, "kind").unwrap_or_default().to_string(),
                get_s(i, "payload").unwrap_or_default().to_string(),
            );
            match tickwork::batch::Batch::of_job(&job) {
                Some(Ok(b)) => b.units(&job.kind).into_iter().map(|u| u.key).collect::<Vec<_>>(),
                _ => vec![],
            }
        })
        .collect();
    for r in rows.difference(&done_rows).collect::<Vec<_>>() {
        // A row whose unit never completed: written by a run whose item then died. Legitimate only
        // for dead units.
        let key = match r.1.split_once('#') {
            Some(("day", d)) => format!("pulse#{}#day#{d}", r.0),
            Some(("utc", d)) => format!("utc-daily#{}#{d}", r.0),
            Some(("sched", rest)) => format!("sched#{}#{rest}", r.0),
            _ => String::new(),
        };
        if !dead_units.contains(&key) {
            fail(w, format!("summary row {r:?} with no completed unit"));
        }
    }

    // 4. The archive: every due change-row version in exactly one object, deleted only if
    //    archived, never a newer one.
    check_archive(w).await;

    // 5. Every stable tenant has its fan-out row for every window the fan-out completed.
    let fan_mark = control
        .iter()
        .find(|i| get_s(i, "pk") == Some("wm#fanout-utc-daily"))
        .and_then(|i| get_s(i, "mark:all").map(str::to_string));
    if let (Some(first), Some(last)) = (w.first_window.clone(), fan_mark) {
        let mut d: jiff::civil::Date = first.parse().expect("date");
        let last: jiff::civil::Date = last.parse().expect("date");
        while d <= last {
            for (id, life) in w.tenants.clone() {
                if !life.stable {
                    continue;
                }
                w.report.checks += 1;
                if !rows.contains(&(id.clone(), format!("utc#{d}"))) {
                    fail(w, format!("fan-out window {d} completed without tenant {id}"));
                }
            }
            d = d.tomorrow().expect("date");
        }
    } else {
        fail(w, "the fan-out never completed a window".into());
    }

    // 6. Every schedule's fires against its own oracle; no due record set aside (none was
    //    unreadable: a record set aside here is one the sweep wrote and could not read back).
    let mut fired: Vec<String> = w.scheds.first_seen.keys().cloned().collect();
    fired.extend(
        deliveries.keys().filter(|k| k.starts_with("sched#") && !w.scheds.first_seen.contains_key(*k)).cloned(),
    );
    let mut found = Vec::new();
    let mut checks = 0;
    super::scheds::check(&w.scheds, &fired, end, &mut |v| found.push(v), &mut checks);
    w.report.checks += checks;
    for v in found {
        fail(w, v);
    }
    for item in &control {
        if get_s(item, "pk").is_some_and(|p| p.starts_with("sdue#") && p.ends_with("#bad")) {
            fail(w, format!("a due record was set aside: {item:?}"));
        }
    }

    // 7. No unit isolated: nothing in these schedules is a tenant's own fault.
    for item in &control {
        if get_s(item, "pk").is_some_and(|p| p.starts_with("fail#")) {
            fail(w, format!("a unit was isolated as failed: {item:?}"));
        }
    }
    w.report.checks += 1;
}

async fn check_archive(w: &mut World) {
    let cutoff = w.last_archive_at - ARCHIVE_AGE;
    // What S3 holds, by version.
    let s3 = archiver::s3_client(&w.local.sdk);
    let mut archived: BTreeMap<(String, String), u32> = BTreeMap::new();
    let mut token = None;
    loop {
        let page =
            s3.list_objects_v2().bucket(&w.bucket).set_continuation_token(token.take()).send().await.expect("list");
        for o in page.contents() {
            let body = s3.get_object().bucket(&w.bucket).key(o.key().unwrap_or_default()).send().await.expect("get");
            let bytes = body.body.collect().await.expect("body").into_bytes();
            for item in archiver::decode_batch(&bytes).expect("an archive object decodes") {
                let v = (
                    get_s(&item, "pk").unwrap_or_default().to_string(),
                    get_s(&item, "tsid").unwrap_or_default().to_string(),
                );
                *archived.entry(v).or_default() += 1;
            }
        }
        match page.next_continuation_token() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    let table: BTreeMap<String, String> = scan(w, &w.changes.clone())
        .await
        .iter()
        .filter_map(|i| Some((get_s(i, "pk")?.to_string(), get_s(i, "tsid")?.to_string())))
        .collect();
    let written: BTreeSet<(String, String)> = w.versions.iter().cloned().collect();
    for (v, n) in &archived {
        w.report.checks += 1;
        if *n > 1 {
            fail(w, format!("version {v:?} is in {n} objects"));
        }
        if !written.contains(v) {
            fail(w, format!("version {v:?} archived but never written"));
        }
    }
    for (pk, (tsid, ts)) in w.latest.clone() {
        w.report.checks += 1;
        let in_s3 = archived.contains_key(&(pk.clone(), tsid.clone()));
        match table.get(&pk) {
            Some(t) if *t != tsid => fail(w, format!("{pk}: the table holds {t}, the writer wrote {tsid} last")),
            Some(_) if ts < cutoff => fail(w, format!("{pk} ({tsid}) was due and is still in the feed: not archived")),
            Some(_) if in_s3 => fail(w, format!("{pk} ({tsid}) archived before it was due")),
            Some(_) => {}
            None if !in_s3 => fail(w, format!("{pk} ({tsid}) deleted and not archived: a newer row deleted")),
            None if ts >= cutoff => fail(w, format!("{pk} ({tsid}) deleted before it was due")),
            None => {}
        }
    }
}
