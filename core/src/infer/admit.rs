//! Bounded output: how many findings a log can make.
//!
//! A log built to hurt (or a retry loop gone wild) can print one failure a hundred
//! thousand times, or a hundred thousand different messages of one rule. Neither may
//! cost memory or a report size in proportion: every draft passes through [`Admit`],
//! which groups by key (rule and message without numbers, [`super::key_of`]) instead of
//! comparing drafts pairwise, and
//!
//! - keeps the first [`FULL_REPORTS`] reports of one key as drafts of their own (the
//!   roles stage merges them, as it always did); a further report of the key is
//!   folded into the first one at once (its rank, its place, one more report): 100,000
//!   ranks printing one watchdog line cost 100,000 small rank records, not 100,000
//!   findings, and every rank is listed;
//! - keeps at most [`KEYS_PER_STREAM`] distinct keys of one rule per stream and
//!   [`KEYS_PER_RULE`] over the whole log; past that a report is only counted, and the
//!   rule's last kept finding carries the count, the first and last lines omitted and
//!   their ranks (`similar_omitted`, `similar_first_line`, `similar_last_line`,
//!   `similar_ranks`).
//!
//! What is kept is the earliest: the first failure, usually the cause, is never the one
//! that goes.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::flood::Flood;
use super::{Draft, RankReport};

/// Reports of one key kept as drafts of their own before the rest are folded.
pub(super) const FULL_REPORTS: usize = 16;
/// Distinct keys (messages) of one rule in one stream before the rest are counted.
pub(super) const KEYS_PER_STREAM: usize = 32;
/// Distinct keys of one rule in all streams together before the rest are counted:
/// 1,000 ranks each printing 20 distinct lines of one rule are at most this many
/// findings.
pub(super) const KEYS_PER_RULE: usize = 256;

/// The evidence keys of a rule's tally of omitted reports, on its last kept finding.
/// A finding merged into another (the same message on another rank) hands them over.
pub(super) const TALLY_KEYS: [&str; 4] =
    ["similar_omitted", "similar_first_line", "similar_last_line", "similar_ranks"];

/// What becomes of a report.
pub(super) enum Verdict {
    /// A draft of its own.
    Keep,
    /// Folded into the draft at this index.
    Fold(usize),
    /// Only counted.
    Omit,
}

/// Reports of one rule that were only counted.
#[derive(Default)]
struct Omitted {
    count: u64,
    first_line: u64,
    last_line: u64,
    ranks: BTreeSet<u32>,
}

/// The drafts of a log, admitted under the bounds above.
#[derive(Default)]
pub(super) struct Admit {
    drafts: Vec<Draft>,
    /// Per key: the index of its first draft, and how many drafts it has.
    by_key: HashMap<String, (usize, usize)>,
    keys_in_stream: HashMap<(usize, usize), usize>,
    keys_of_rule: HashMap<usize, usize>,
    /// Per rule id.
    omitted: HashMap<String, Omitted>,
    /// Which loose reports are read in full ([`Flood`]).
    pub(super) flood: Flood,
}

impl Admit {
    /// What becomes of a report of `rule` in stream `stream` with key `key`. A `Keep`
    /// must be followed by [`Admit::keep`] of its draft.
    pub(super) fn verdict(&mut self, stream: usize, rule: usize, key: &str) -> Verdict {
        if let Some((first, n)) = self.by_key.get_mut(key) {
            if *n < FULL_REPORTS {
                *n += 1;
                return Verdict::Keep;
            }
            return Verdict::Fold(*first);
        }
        let in_stream = self.keys_in_stream.entry((stream, rule)).or_insert(0);
        let of_rule = self.keys_of_rule.entry(rule).or_insert(0);
        if *in_stream >= KEYS_PER_STREAM || *of_rule >= KEYS_PER_RULE {
            return Verdict::Omit;
        }
        *in_stream += 1;
        *of_rule += 1;
        self.by_key.insert(key.to_string(), (self.drafts.len(), 1));
        Verdict::Keep
    }

    /// What [`Admit::verdict`] would say, where it changes nothing: a fold or an omission
    /// (`None`: the report would be kept, and must be read in full to be).
    pub(super) fn settled(&self, stream: usize, rule: usize, key: &str) -> Option<Verdict> {
        if let Some(&(first, n)) = self.by_key.get(key) {
            return (n >= FULL_REPORTS).then_some(Verdict::Fold(first));
        }
        (!self.may_keep_new(stream, rule)).then_some(Verdict::Omit)
    }

    /// Whether a report of `rule` in `stream` with a key not seen before would be kept.
    pub(super) fn may_keep_new(&self, stream: usize, rule: usize) -> bool {
        self.keys_in_stream.get(&(stream, rule)).copied().unwrap_or(0) < KEYS_PER_STREAM
            && self.keys_of_rule.get(&rule).copied().unwrap_or(0) < KEYS_PER_RULE
    }

    /// Whether no draft was kept.
    pub(super) fn is_empty(&self) -> bool {
        self.drafts.is_empty()
    }

    /// Adds a draft a [`Verdict::Keep`] admitted.
    pub(super) fn keep(&mut self, d: Draft) {
        self.drafts.push(d);
    }

    /// Folds one more report (its rank and its own record) into draft `into`.
    pub(super) fn fold(&mut self, into: usize, rank: Option<u32>, own: Option<RankReport>) {
        let d = &mut self.drafts[into];
        d.finding.ranks.extend(rank);
        d.per_rank.extend(own);
        d.reports += 1;
    }

    /// Counts a report of rule `id` at input line `line` without keeping it.
    pub(super) fn omit(&mut self, id: &str, line: u64, rank: Option<u32>) {
        let o = self.omitted.entry(id.to_string()).or_default();
        if o.count == 0 || line < o.first_line {
            o.first_line = line;
        }
        o.last_line = o.last_line.max(line);
        o.count += 1;
        o.ranks.extend(rank);
    }

    /// Counts `count` reports of rule `id` between input lines `first` and `last` that
    /// matching only counted (see `matching::MAX_EVENTS_PER_RULE`).
    pub(super) fn omit_many(&mut self, id: &str, count: u64, (first, last): (u64, u64), rank: Option<u32>) {
        if count == 0 {
            return;
        }
        let o = self.omitted.entry(id.to_string()).or_default();
        if o.count == 0 || first < o.first_line {
            o.first_line = first;
        }
        o.last_line = o.last_line.max(last);
        o.count += count;
        o.ranks.extend(rank);
    }

    /// The drafts in input order, each rule's count of omitted reports on its last one.
    pub(super) fn finish(self) -> Vec<Draft> {
        let mut drafts = self.drafts;
        drafts.sort_by_key(|d| d.finding.location.line);
        let mut last_of: HashMap<&str, usize> = HashMap::new();
        for (i, d) in drafts.iter().enumerate() {
            last_of.insert(d.finding.id.as_str(), i);
        }
        let mut tallies: Vec<(usize, Omitted)> =
            self.omitted.into_iter().filter_map(|(id, o)| Some((*last_of.get(id.as_str())?, o))).collect();
        tallies.sort_by_key(|(i, _)| *i);
        for (i, o) in tallies {
            let ev = &mut drafts[i].finding.evidence;
            let [omitted, first, last, ranks] = TALLY_KEYS;
            ev.insert(omitted, Value::from(o.count));
            ev.insert(first, Value::from(o.first_line));
            ev.insert(last, Value::from(o.last_line));
            if !o.ranks.is_empty() {
                let list: Vec<u32> = o.ranks.into_iter().collect();
                ev.insert(ranks, Value::from(crate::report::compress_ranks(&list)));
            }
        }
        drafts
    }
}
