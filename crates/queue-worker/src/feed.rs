//! Step 1 of the drain ([`crate::drain`]): where the next item comes from. A poll of one ready
//! shard for a page of keys (a key-condition Query that never reads a claimed, unexpired item),
//! starting at a random shard; a shard whose page came back full is polled again when its keys
//! are used up, and a round of every shard that finds nothing ends the feed. A pause marker among
//! the keys stops it (pausing costs no read of its own). A full page is a backlog: the fleet is
//! asked to grow, once per drain. The keys a drain tries are spread over the fleet ([`spread`]),
//! and one take ([`take`]) polls as needed and claims the next one it can.

use std::collections::{HashSet, VecDeque};

use futures::future::BoxFuture;
use tickwork::budget::Budget;
use tickwork::queue::{Candidate, Claim, Queue, QueueError, PAUSE_PREFIX};

use crate::growing::Grow;

pub(crate) type TakeRun<'a> = BoxFuture<'a, (Feed, Result<Option<Claim>, QueueError>)>;

/// Step 1 and the claim of step 2: the next candidate claimed, losing races on the way (a lost
/// claim is free of side effects; the next candidate is tried); `None` when the feed ran dry or
/// the budget ran out. A candidate this drain holds (`mine`: a poll of an index that lags its
/// table still lists an item it claimed a moment ago) is passed over: claiming it again would
/// read as this owner's own retried claim, and run its units twice.
pub(crate) async fn take(
    queue: &Queue,
    owner: &str,
    mut feed: Feed,
    fleet: &dyn Grow,
    budget: &dyn Budget,
    mine: HashSet<String>,
) -> (Feed, Result<Option<Claim>, QueueError>) {
    loop {
        if budget.exhausted() {
            return (feed, Ok(None));
        }
        let c = match feed.next(queue, fleet, budget, &mine).await {
            Ok(Some(c)) => c,
            Ok(None) => return (feed, Ok(None)),
            Err(e) => return (feed, Err(e)),
        };
        match queue.claim(&c.id, owner).await {
            Ok(Claim::Taken) => feed.taken += 1,
            other => return (feed, other.map(Some)),
        }
    }
}

/// Where the next candidate comes from: step 1.
#[derive(Debug)]
pub(crate) struct Feed {
    shards: u32,
    offset: u32,
    /// Shards polled empty (or short) in this round.
    pos: u32,
    found: bool,
    buffer: VecDeque<Candidate>,
    limit: i32,
    pub(crate) done: bool,
    pub(crate) paused: bool,
    grown: bool,
    /// The last poll came back full: its shard has more.
    full: bool,
    /// A full page seen for the first time: the fleet is to grow for this many keys.
    pub(crate) grow: Option<usize>,
    pub(crate) polls: u64,
    pub(crate) candidates: u64,
    pub(crate) taken: u64,
    pub(crate) oldest_ready_ms: u64,
}

impl Feed {
    pub(crate) fn new(shards: u32, limit: i32) -> Self {
        let shards = shards.max(1);
        Self {
            shards,
            offset: fastrand::u32(0..shards),
            pos: 0,
            found: false,
            buffer: VecDeque::new(),
            limit: limit.max(1),
            done: false,
            paused: false,
            grown: false,
            full: false,
            grow: None,
            polls: 0,
            candidates: 0,
            taken: 0,
            oldest_ready_ms: 0,
        }
    }

    /// Ready work that may be left: keys in hand, a shard whose page was full, or a shard this
    /// round has not polled yet. With several ready shards a drain stopped after a short page of
    /// one has not looked at the others: counted as nothing left, their items would wait for the
    /// safety poll. A round whose every shard gave a short page has seen all that was ready: a
    /// drain stopped then hands on nothing (counted as more, every drain of a fleet at the end of
    /// a backlog started a successor that found the queue empty).
    pub(crate) fn more(&self) -> bool {
        !self.paused && (!self.buffer.is_empty() || self.full || (!self.done && self.pos < self.shards))
    }

    /// Another round: something became ready since the feed ran dry.
    pub(crate) fn reopen(&mut self) {
        if !self.paused {
            self.done = false;
            self.pos = 0;
            self.found = false;
        }
    }

    async fn next(
        &mut self,
        queue: &Queue,
        fleet: &dyn Grow,
        budget: &dyn Budget,
        mine: &HashSet<String>,
    ) -> Result<Option<Candidate>, QueueError> {
        loop {
            if let Some(c) = self.buffer.pop_front() {
                return Ok(Some(c));
            }
            if self.done || budget.exhausted() {
                return Ok(None);
            }
            if self.pos == self.shards {
                if !self.found {
                    self.done = true;
                    return Ok(None);
                }
                self.pos = 0;
                self.found = false;
            }
            let k = (self.offset + self.pos) % self.shards;
            let now = queue.clock().now_ms();
            // As many keys again as this drain holds: held items a lagging index still lists
            // cannot fill the page and hide the ready ones behind them (the shard would count as
            // dry with work left in it).
            let want = self.limit.saturating_add(mine.len().min(i32::MAX as usize) as i32);
            let page = queue.poll(k, want).await?;
            self.polls += 1;
            if page.iter().any(|c| c.id.starts_with(PAUSE_PREFIX)) {
                self.paused = true;
                self.done = true;
                return Ok(None);
            }
            self.candidates += page.len() as u64;
            if let Some(oldest) = page.iter().map(|c| c.visible_at).min() {
                self.oldest_ready_ms = self.oldest_ready_ms.max((now - oldest).max(0) as u64);
            }
            let full = page.len() as i32 >= want;
            // What this drain holds is no candidate, and a page of nothing else found nothing:
            // counted as found, the feed would poll the same keys round after round while they
            // stay listed (a lagging index, or an item settled while this take was out).
            let mut page = page;
            page.retain(|c| !mine.contains(&c.id));
            self.full = full && !page.is_empty();
            if !self.full {
                self.pos += 1;
            }
            if page.is_empty() {
                continue;
            }
            self.found = true;
            if full && !self.grown {
                self.grown = true;
                self.grow = Some(page.len());
            }
            self.buffer.extend(spread(page, fleet.place()));
        }
    }
}

/// The keys of a page a drain tries, in order. Pure. A drain with a place in the fleet, slot `k`
/// of `n`, tries its own share (every `n`-th key from the `k`-th), so that drains polling one page
/// at once claim different items instead of racing for the oldest, and polls again when it is
/// used up (the others' shares are theirs, and likely claimed by now); only a page that holds no
/// share of its (a short page at the end) is tried whole, from its place on. Any other drain
/// tries the whole page from a random key.
fn spread(page: Vec<Candidate>, place: Option<(u32, u32)>) -> Vec<Candidate> {
    let len = page.len();
    match place {
        Some((k, n)) if n > 1 && len > 0 => {
            let (k, n) = (k as usize % n as usize, n as usize);
            if k < len {
                page.into_iter().skip(k).step_by(n).collect()
            } else {
                let start = k % len;
                page[start..].iter().chain(&page[..start]).cloned().collect()
            }
        }
        _ => {
            let start = fastrand::usize(0..len.max(1));
            page[start.min(len)..].iter().chain(&page[..start.min(len)]).cloned().collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cands(n: usize) -> Vec<Candidate> {
        (0..n).map(|i| Candidate { id: format!("c{i}"), visible_at: 0 }).collect()
    }

    fn ids(v: Vec<Candidate>) -> Vec<String> {
        v.into_iter().map(|c| c.id).collect()
    }

    #[test]
    fn work_may_be_left_until_a_round_of_every_shard_finds_none() {
        let mut f = Feed::new(4, 10);
        assert!(f.more(), "no shard looked at yet");
        f.pos = 1;
        assert!(f.more(), "one short page of four shards proves nothing of the other three");
        f.pos = 4;
        assert!(!f.more(), "a short page of every shard: all that was ready was seen");
        f.pos = 0;
        f.done = true;
        assert!(!f.more(), "a dry round of every shard");
        f.full = true;
        assert!(f.more(), "a full page: its shard has more");
        f.paused = true;
        assert!(!f.more(), "a paused queue hands nothing on");
    }

    #[test]
    fn drains_in_a_fleet_try_their_own_share_of_a_page() {
        assert_eq!(ids(spread(cands(8), Some((1, 4)))), ["c1", "c5"], "slot 1 of 4: every fourth key from the second");
        // The four drains' shares are the page, each key once.
        let mut all: Vec<String> = (0..4).flat_map(|k| ids(spread(cands(8), Some((k, 4))))).collect();
        all.sort();
        assert_eq!(all, ids(cands(8)));
        // A short page with no share of a drain's: it takes what there is, from its place.
        assert_eq!(ids(spread(cands(2), Some((5, 8)))), ["c1", "c0"]);
        assert_eq!(ids(spread(cands(3), None)).len(), 3);
        assert!(spread(Vec::new(), None).is_empty());
    }
}
