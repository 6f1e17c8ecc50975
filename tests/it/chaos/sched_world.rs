//! The chaos world's schedules: the first definitions, the writes made while the sweep fires,
//! the bookkeeping after each (read back from the store, so the harness's segments say what the
//! library wrote), the queue scans that date each fire, and TTL applied as DynamoDB would.

use std::sync::Arc;

use tickwork::clock::{Clock, Millis};
use tickwork::schedules::{Dst, ScheduleDef, Schedules, Spec};

use super::scheds::SPECS;
use super::world::World;

/// The sweep's catch-up rules, as its settings give them (a one-off it would pass over is refused).
fn policy() -> tickwork::calendar::Policy {
    pulse_sweep::PulseConfig::from_env(&env(), std::time::Duration::from_secs(1)).expect("sweep settings").policy
}

/// The sweep's settings in the chaos world (its job name, its catch-up rules).
fn env() -> tickwork::config::Env {
    tickwork::config::Env::from_pairs([("TICKWORK_PULSE_PAGE_SIZE", "4")])
}

fn def(name: &str, spec: &str) -> ScheduleDef {
    let spec: Spec = spec.parse().expect("a spec the churn writes");
    ScheduleDef::new(name, spec.clone(), 0, Dst::for_spec(&spec)).expect("a definition")
}

impl World {
    /// The operator's schedules API, fault-free (see the module: the harness must know what it
    /// wrote).
    pub(super) fn schedules(&self) -> Schedules {
        let job = pulse_sweep::config::job(&env()).expect("job");
        Schedules::new(self.local.fresh_db(), &self.control, job, Arc::new(self.clock.clone()))
    }

    /// The first definitions: a daily 08:00 shared by two tenants a zone, a wildcard cron every
    /// six hours, Berlin's 02:30 (in the spring gap on the 29th).
    pub(super) async fn sched_setup(&mut self) {
        let s = self.schedules();
        for i in 0..12 {
            let t = format!("t{i:02}");
            let zone = self.tenants[&t].zone.clone();
            let mut defs = vec![("nudge", "daily 08:00")];
            if i < 6 {
                defs.push(("six", "cron 0 */6 * * *"));
            }
            if zone == "Europe/Berlin" {
                defs.push(("night", "daily 02:30"));
            }
            for (name, spec) in defs {
                s.put(&t, &zone, def(name, spec), &policy()).await.expect("a first schedule");
            }
            self.sched_sync(&t).await;
        }
    }

    /// The stream's mapping: the writers' records since the last hand-over, to a sweep process
    /// with the round's faults. A batch that fails is handed over again, as the mapping retries
    /// until it succeeds (within seconds on AWS: here up to eight processes in a row); a failure no
    /// injected fault explains is a finding.
    pub(super) async fn hand_over_stream(&mut self, faulty: bool) {
        for attempt in 0..8 {
            let (f, clock) = self.process(faulty && attempt < 7);
            let deps = self.sweep_deps(&f, clock);
            match tickwork_tests::streams::pump(&self.local.sdk, &deps).await {
                Ok(n) => {
                    if n > 0 {
                        self.count("stream records handed over");
                    }
                    return;
                }
                Err(e) => {
                    self.count("stream batches failed and handed over again");
                    let e = format!("{e:#}");
                    if !f.crashed()
                        && !e.contains("throttled")
                        && !e.contains("injected")
                        && !e.contains("after retries")
                    {
                        self.report
                            .violations
                            .push(format!("the stream's batch failed with no fault to explain it: {e}"));
                        return;
                    }
                }
            }
        }
    }

    /// One schedule write through the library while the sweep may be firing: a change, a pause,
    /// a resume, a removal, or a one-off a few hours on.
    pub(super) async fn sched_churn(&mut self) {
        let tenants = self.scheds.tenants();
        let t = tenants[self.rng.usize(..tenants.len())].clone();
        let zone = self.tenants[&t].zone.clone();
        let s = self.schedules();
        let listed = s.list(&t).await.expect("list");
        let pick = (!listed.is_empty()).then(|| listed[self.rng.usize(..listed.len())].clone());
        let now = self.clock.now_ms();
        let done = match (self.rng.u8(0..6), pick) {
            (0 | 1, _) => {
                let name = ["nudge", "six", "night", "extra"][self.rng.usize(..4)];
                let spec = SPECS[self.rng.usize(..SPECS.len())];
                self.count("schedules put mid-run");
                s.put(&t, &zone, def(name, spec), &policy()).await.map(|_| ())
            }
            (2, Some(p)) => {
                self.count("schedules paused");
                s.set_paused(&t, &p.def.name, true, &zone).await.map(|_| ())
            }
            (3, Some(p)) if p.paused => {
                self.count("schedules resumed");
                s.set_paused(&t, &p.def.name, false, &zone).await.map(|_| ())
            }
            (4, Some(p)) => {
                self.count("schedules removed");
                self.scheds.close(&(t.clone(), p.def.name.clone()), now);
                s.remove(&t, &p.def.name).await.map(|_| ())
            }
            (5, _) => {
                let tz = tickwork::calendar::zone(&zone).expect("zone");
                let at = now + self.rng.i64(1..=10) * 3_600_000 + self.rng.i64(0..12) * 5 * 60_000;
                let local = jiff::Timestamp::from_millisecond(at).expect("instant").to_zoned(tz).datetime();
                let spec = format!("at {}", local.strftime("%Y-%m-%dT%H:%M"));
                self.scheds.one_offs += 1;
                let name = format!("once-{}", self.scheds.one_offs);
                self.count("one-offs added mid-run");
                s.put(&t, &zone, def(&name, &spec), &policy()).await.map(|_| ())
            }
            _ => Ok(()),
        };
        if let Err(e) = done {
            // Refused as documented (a one-off resumed past its instant), or raced by the sweep.
            if std::env::var("CHAOS_TRACE").is_ok() {
                eprintln!("  schedule write for {t} refused: {e}");
            }
            self.count("schedule writes refused");
        }
        self.sched_sync(&t).await;
    }

    /// After a tenant is moved or resumed: its schedules owed from now in its zone, as `tickctl`
    /// does it (`Schedules::retarget`).
    pub(super) async fn sched_retarget(&mut self, t: &str) {
        if !self.scheds.tenants().iter().any(|x| x == t) {
            return;
        }
        let zone = self.tenants[t].zone.clone();
        // A retarget removes a one-off whose time has passed in the new zone: its stretch in the
        // old zone ends here (the sync opens one in the new zone for those it keeps).
        let now = self.clock.now_ms();
        let one_offs: Vec<(String, String)> = self
            .scheds
            .defs
            .iter()
            .filter(|((x, _), v)| x == t && v.last().is_some_and(|g| g.to.is_none() && g.spec.starts_with("at ")))
            .map(|(k, _)| k.clone())
            .collect();
        for k in one_offs {
            self.scheds.close(&k, now);
        }
        self.schedules().retarget(t, &zone).await.expect("retarget");
        self.sched_sync(t).await;
    }

    /// The harness's segments for `t`, from what the store holds now: a definition active (and
    /// its tenant active) is live from its `since`; one that is not, or is gone, ended now — but a
    /// one-off gone while live was fired and removed by the sweep: still live, so the check
    /// requires its fire.
    pub(super) async fn sched_sync(&mut self, t: &str) {
        let now = self.clock.now_ms();
        let listed = self.schedules().list(t).await.expect("list");
        let life = &self.tenants[t];
        let (active, zone) = (life.active, life.zone.clone());
        let mut names: Vec<String> = self.scheds.defs.keys().filter(|(x, _)| x == t).map(|(_, n)| n.clone()).collect();
        names.extend(listed.iter().map(|s| s.def.name.clone()));
        names.sort();
        names.dedup();
        for name in names {
            let key = (t.to_string(), name.clone());
            match listed.iter().find(|s| s.def.name == name) {
                Some(s) if !s.paused && active => {
                    let spec = s.def.spec.to_string();
                    let same =
                        self.scheds.defs.get(&key).and_then(|v| v.last()).is_some_and(|g| {
                            g.to.is_none() && g.from == s.since_ms && g.spec == spec && g.zone == zone
                        });
                    if !same {
                        self.scheds.close(&key, now);
                        self.scheds.defs.entry(key).or_default().push(super::scheds::Seg {
                            from: s.since_ms,
                            to: None,
                            spec,
                            zone: zone.clone(),
                        });
                    }
                }
                None if self.scheds.live(&key)
                    && active
                    && self.scheds.defs[&key].last().is_some_and(|g| g.spec.starts_with("at ")) => {}
                _ => self.scheds.close(&key, now),
            }
        }
    }

    /// Dates every `sched#` unit in the queue at round time `at` (the first scan that sees it).
    pub(super) async fn sched_scan(&mut self, at: Millis) {
        let units = tickwork_sim::queued_units(&self.local.db, &self.queue).await.expect("queue scan");
        for (key, n) in units {
            if !key.starts_with("sched#") {
                continue;
            }
            if n > 1 && !self.scheds.doubled.contains(&key) {
                self.scheds.doubled.push(key.clone());
            }
            self.scheds.first_seen.entry(key).or_insert(at);
        }
    }

    /// Deletes every control item whose `ttl` has passed, as DynamoDB's TTL may at any time
    /// after it ("Time to Live", DynamoDB Developer Guide: typically within days, never before).
    pub(super) async fn apply_ttl(&mut self) {
        let n = crate::schedules::expire(&self.local, &self.control, self.clock.now_ms()).await;
        *self.report.events.entry("items deleted by TTL".to_string()).or_default() += n as u64;
    }
}
