//! Where a settle moves a claimed item, and the update that moves it: pure, with its tests. The
//! I/O that applies it, conditional on the claim, is [`crate::queue::settle`]'s.

use crate::clock::Millis;
use crate::queue::schema::*;
use crate::schema::{av_n, av_s, TTL};

/// Outcome of finish, extend or fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Done as asked.
    Settled,
    /// Retried later at the given instant.
    Retrying {
        /// When it becomes visible again (ms).
        at_ms: Millis,
    },
    /// Moved to the dead letters.
    DeadLettered,
    /// Split into `parts` new items, each to run alone (its worker died: [`Job::died`]).
    Split {
        /// How many.
        parts: u32,
    },
    /// The claim expired and someone else owns the item now: nothing changed.
    NotOwner,
}

/// Where a settle moves a claimed item. Pure: the update each makes is [`Transition::update`],
/// written once for the single-item settles and the batch settle's transaction alike.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Transition {
    /// Done at `now_ms`: a tombstone out of the ready index, its payload dropped, expiring at
    /// `ttl_s` (one that went wrong stays in the [`TROUBLE_INDEX`] until then, as handled);
    /// `forget`: it leaves the index instead (its units went on in parts, or it is of
    /// [`SEVERAL`] tenants, whose partition holds live items only).
    Done { ttl_s: i64, now_ms: Millis, forget: bool },
    /// Back to pending, visible at `at_ms`, with why; `payload` replaces the item's (a batch's
    /// remaining units); `refund` takes back the claim's attempt (only the deadline or a throttle
    /// stopped it); `throttled` counts the claim in [`THROTTLES`]; `trouble`, the one tenant of
    /// what it holds when it went wrong ([`TROUBLE`]).
    Retry {
        at_ms: Millis,
        error: String,
        payload: Option<String>,
        refund: bool,
        throttled: bool,
        trouble: Option<String>,
    },
    /// To the dead letters, with why; `payload` replaces the item's (a batch's remaining units);
    /// `trouble` as for `Retry`.
    Dead { now_ms: Millis, error: String, payload: Option<String>, trouble: Option<String> },
}

/// Errors kept on an item are cut to this many characters (an item is at most 400 KB).
pub(super) const MAX_ERROR_CHARS: usize = 2000;

impl Transition {
    pub(super) fn outcome(&self) -> Settle {
        match self {
            Transition::Done { .. } => Settle::Settled,
            Transition::Retry { at_ms, .. } => Settle::Retrying { at_ms: *at_ms },
            Transition::Dead { .. } => Settle::DeadLettered,
        }
    }

    /// The update expression, its names and its values (beside [`MINE`]'s, which the caller adds).
    pub(super) fn update(&self) -> crate::schema::ExprParts {
        let cut = |e: &str| av_s(e.chars().take(MAX_ERROR_CHARS).collect::<String>());
        match self {
            Transition::Done { ttl_s, now_ms, forget } => {
                let mut names = vec![
                    ("#ttl", TTL),
                    ("#fin", FINISHED_AT),
                    ("#shard", SHARD),
                    ("#vis", VISIBLE_AT),
                    ("#payload", PAYLOAD),
                ];
                let mut remove = "REMOVE #shard, #vis, #payload".to_string();
                if *forget {
                    remove.push_str(", #trouble");
                    names.push(("#trouble", TROUBLE));
                }
                (
                    format!("SET #state = :done, #ttl = :ttl, #fin = :fin {remove}"),
                    names,
                    vec![(":done", av_s(DONE)), (":ttl", av_n(ttl_s)), (":fin", av_n(now_ms))],
                )
            }
            Transition::Retry { at_ms, error, payload, refund, throttled, trouble } => {
                let mut set = vec!["#state = :pending", "#vis = :at", "#err = :err"];
                let mut names = vec![("#vis", VISIBLE_AT), ("#err", LAST_ERROR)];
                let mut values = vec![(":pending", av_s(PENDING)), (":at", av_n(at_ms)), (":err", cut(error))];
                replaced(&mut set, &mut names, &mut values, payload, trouble);
                if *refund {
                    set.push("#attempts = #attempts - :one");
                    values.push((":one", av_n(1)));
                }
                if *throttled {
                    set.push("#throttles = if_not_exists(#throttles, :t0) + :t1");
                    names.push(("#throttles", THROTTLES));
                    values.push((":t0", av_n(0)));
                    values.push((":t1", av_n(1)));
                }
                (format!("SET {} REMOVE #owner", set.join(", ")), names, values)
            }
            Transition::Dead { now_ms, error, payload, trouble } => {
                let mut set = vec!["#state = :dead", "#dlq = :dlq", "#failed = :now", "#err = :err"];
                let mut names = vec![("#dlq", DLQ), ("#failed", FAILED_AT), ("#err", LAST_ERROR), ("#shard", SHARD)];
                let mut values = vec![
                    (":dead", av_s(DEAD)),
                    (":dlq", av_s(DLQ_PARTITION)),
                    (":now", av_n(now_ms)),
                    (":err", cut(error)),
                ];
                // The shared partition holds live items only: a dead letter of several tenants'
                // units leaves it (dead letters have no expiry).
                let shared = trouble.as_deref() == Some(SEVERAL);
                replaced(&mut set, &mut names, &mut values, payload, if shared { &None } else { trouble });
                let remove = if shared {
                    names.push(("#trouble", TROUBLE));
                    "REMOVE #shard, #owner, #trouble"
                } else {
                    "REMOVE #shard, #owner"
                };
                (format!("SET {} {remove}", set.join(", ")), names, values)
            }
        }
    }
}

/// The SETs a retry and a dead letter share: the payload that replaces the item's (a batch's
/// remaining units) and the name it stands under in the trouble index.
fn replaced(
    set: &mut Vec<&'static str>,
    names: &mut Vec<(&'static str, &'static str)>,
    values: &mut Vec<(&'static str, aws_sdk_dynamodb::types::AttributeValue)>,
    payload: &Option<String>,
    trouble: &Option<String>,
) {
    if let Some(p) = payload {
        set.push("#payload = :p");
        names.push(("#payload", PAYLOAD));
        values.push((":p", av_s(p)));
    }
    if let Some(t) = trouble {
        set.push("#trouble = :who");
        names.push(("#trouble", TROUBLE));
        values.push((":who", av_s(t)));
    }
}

/// What a batch settle does ([`Queue::settle_batch`]): every unit done → done; units left after
/// failures on the last attempt → the item is dead-lettered with them; failures with attempts
/// left → retry the rest after the backoff (`backoff_at`); only the deadline stopped it → retry
/// the rest now, the attempt refunded.
#[allow(clippy::too_many_arguments)]
pub(super) fn batch_transition(
    remaining: Option<(&str, Option<String>)>,
    error: Option<&str>,
    throttled: Option<(&str, Millis)>,
    last_attempt: bool,
    now: Millis,
    backoff_at: Millis,
    ttl_s: i64,
    forget: bool,
) -> Transition {
    // `who`: the remainder's one tenant, named in the trouble index when it went wrong (a
    // failure or a throttle; the deadline alone is no trouble).
    let retry = |at_ms, error: &str, rest: &str, refund, throttled, who: &Option<String>| Transition::Retry {
        at_ms,
        error: error.to_string(),
        payload: Some(rest.to_string()),
        refund,
        throttled,
        trouble: who.clone(),
    };
    match (remaining, error, throttled) {
        (None, _, _) => Transition::Done { ttl_s, now_ms: now, forget },
        (Some((rest, who)), Some(e), _) if last_attempt => {
            Transition::Dead { now_ms: now, error: e.to_string(), payload: Some(rest.to_string()), trouble: who }
        }
        // A failure spends the attempt; a throttle beside it only delays the retry.
        (Some((rest, who)), Some(e), t) => retry(backoff_at.max(t.map_or(0, |t| t.1)), e, rest, false, false, &who),
        (Some((rest, who)), None, Some((why, at))) => retry(at, why, rest, true, true, &who),
        (Some((rest, _)), None, None) => {
            retry(now, "stopped by the deadline; the rest continues", rest, true, false, &None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::settle::{mine_condition, tests::job};

    #[test]
    fn a_batch_settles_done_retried_refunded_or_dead() {
        let t = |rest: Option<&str>, err: Option<&str>, last: bool| {
            batch_transition(rest.map(|r| (r, Some("acme".to_string()))), err, None, last, 100, 900, 7, false)
        };
        assert_eq!(
            t(None, Some("x"), true),
            Transition::Done { ttl_s: 7, now_ms: 100, forget: false },
            "every unit ran: done"
        );
        assert_eq!(
            t(Some("r"), Some("boom"), false),
            Transition::Retry {
                at_ms: 900,
                error: "boom".into(),
                payload: Some("r".into()),
                refund: false,
                throttled: false,
                trouble: Some("acme".into()),
            },
            "a failure names the remainder's tenant in the trouble index"
        );
        assert_eq!(
            t(Some("r"), None, true),
            Transition::Retry {
                at_ms: 100,
                error: "stopped by the deadline; the rest continues".into(),
                payload: Some("r".into()),
                refund: true,
                throttled: false,
                trouble: None,
            },
            "the deadline alone is no attempt, even the last, and no trouble"
        );
        assert_eq!(
            t(Some("r"), Some("boom"), true),
            Transition::Dead {
                now_ms: 100,
                error: "boom".into(),
                payload: Some("r".into()),
                trouble: Some("acme".into())
            }
        );
    }

    #[test]
    fn a_dead_letter_of_several_tenants_leaves_the_shared_partition_and_of_one_names_it() {
        let dead = |who: &str| {
            Transition::Dead { now_ms: 1, error: "e".into(), payload: None, trouble: Some(who.into()) }.update()
        };
        let (expr, _, values) = dead(SEVERAL);
        assert!(expr.ends_with("REMOVE #shard, #owner, #trouble") && !expr.contains(":who"), "{expr}");
        assert!(values.iter().all(|(k, _)| *k != ":who"));
        let (expr, _, _) = dead("acme");
        assert!(expr.contains("#trouble = :who") && expr.ends_with("REMOVE #shard, #owner"), "{expr}");
    }

    #[test]
    fn a_throttle_refunds_the_attempt_and_waits_but_a_failure_beside_it_spends_one() {
        let t = |err: Option<&str>, last: bool| {
            batch_transition(Some(("r", None)), err, Some(("slow down", 5_000)), last, 100, 900, 7, false)
        };
        assert_eq!(
            t(None, true),
            Transition::Retry {
                at_ms: 5_000,
                error: "slow down".into(),
                payload: Some("r".into()),
                refund: true,
                throttled: true,
                trouble: None,
            },
            "even on the last attempt a throttle is no attempt"
        );
        let Transition::Retry { at_ms, refund, throttled, .. } = t(Some("boom"), false) else { panic!() };
        assert_eq!((at_ms, refund, throttled), (5_000, false, false), "the later of the backoff and the throttle");
        assert!(matches!(t(Some("boom"), true), Transition::Dead { .. }));
    }

    #[test]
    fn every_transition_names_and_values_what_its_expression_uses() {
        let long = "e".repeat(5000);
        for t in [
            Transition::Done { ttl_s: 1, now_ms: 1, forget: false },
            Transition::Done { ttl_s: 1, now_ms: 1, forget: true },
            Transition::Retry {
                at_ms: 1,
                error: long.clone(),
                payload: None,
                refund: false,
                throttled: false,
                trouble: None,
            },
            Transition::Retry {
                at_ms: 1,
                error: "e".into(),
                payload: Some("p".into()),
                refund: true,
                throttled: false,
                trouble: Some("t".into()),
            },
            Transition::Retry {
                at_ms: 1,
                error: "e".into(),
                payload: None,
                refund: true,
                throttled: true,
                trouble: Some("t".into()),
            },
            Transition::Dead { now_ms: 1, error: long.clone(), payload: None, trouble: None },
            Transition::Dead { now_ms: 1, error: "e".into(), payload: Some("p".into()), trouble: Some("t".into()) },
            Transition::Dead { now_ms: 1, error: "e".into(), payload: None, trouble: Some(SEVERAL.into()) },
        ] {
            let (expr, names, values) = t.update();
            // DynamoDB refuses a name or value given and unused, and one used and not given; the
            // caller adds the claim condition's own (`mine_condition`: #owner, #attempts, #state).
            let (_, mine_names, _) = mine_condition(&job());
            let given_n: Vec<&str> = names.iter().map(|(k, _)| *k).chain(mine_names.iter().map(|(k, _)| *k)).collect();
            let given_v: Vec<&str> = values.iter().map(|(k, _)| *k).collect();
            let used = |sigil: char| -> Vec<String> {
                expr.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == sigil))
                    .filter(|w| w.starts_with(sigil))
                    .map(str::to_string)
                    .collect()
            };
            for n in used('#') {
                assert!(given_n.contains(&n.as_str()), "{t:?}: {n} used, not named");
            }
            for n in &names {
                assert!(expr.contains(n.0), "{t:?}: {} named, not used", n.0);
            }
            for v in used(':') {
                assert!(given_v.contains(&v.as_str()), "{t:?}: {v} used, not given");
            }
            for v in &given_v {
                assert!(expr.contains(v), "{t:?}: {v} given, not used");
            }
            for (k, v) in &values {
                if *k == ":err" {
                    assert!(v.as_s().unwrap().chars().count() <= MAX_ERROR_CHARS);
                }
            }
        }
    }
}
