//! The torchrun `ChildFailedError` summary block.
//!
//! ```text
//! Failures:
//! [1]:
//!   time      : 2026-11-29_16:42:24
//!   host      : localhost
//!   rank      : 0 (local_rank: 0)
//!   exitcode  : -15 (pid: 26402)  (SIGTERM)
//!   error_file: logs/.../error.json
//!   traceback : Traceback (most recent call last): ...
//! ------------------------------------------------------------
//! Root Cause (first observed failure):
//! [0]:
//!   ...
//! ```
//!
//! Each `[k]:` entry (also the 1.9 layout with `rank: 0 (local_rank: 0)`) becomes an
//! [`Entry`] with the lines it spans, so an error quoted inside its `traceback :` field
//! can be attributed to the entry's global rank.

use nom::bytes::complete::tag;
use nom::character::complete::{char, digit1, space0};
use nom::combinator::opt;
use nom::{IResult, Parser};

use super::atoms::int;

/// One failure listed in the summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub rank: u32,
    pub local_rank: Option<u32>,
    /// The `host :` field.
    pub host: Option<String>,
    pub exitcode: Option<i64>,
    /// `YYYY-MM-DD_HH:MM:SS` as printed.
    pub time: Option<String>,
    /// Listed under `Root Cause`.
    pub root_cause: bool,
    /// Stream line indices the entry spans (its `[k]:` line to its last field line).
    pub first: usize,
    pub last: usize,
}

fn field<'a>(name: &'static str) -> impl Parser<&'a str, Output = (), Error = nom::error::Error<&'a str>> {
    (space0, tag(name), space0, opt(char(':')), space0).map(|_| ())
}

fn rank_line(i: &str) -> IResult<&str, (u32, Option<u32>)> {
    let (rest, (_, r, _, lr)) = (
        field("rank"),
        digit1,
        space0,
        opt((tag("(local_rank:"), space0, digit1, char(')')).map(|(_, _, d, _): (&str, &str, &str, char)| d)),
    )
        .parse(i)?;
    Ok((rest, (r.parse().unwrap_or(0), lr.and_then(|d| d.parse().ok()))))
}

/// Finds the entries of every summary block in a stream's lines.
pub fn entries(lines: &[&str]) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut root = false;
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        if t.starts_with("Root Cause") {
            root = true;
        } else if t.starts_with("Failures:") || t.starts_with("Other Failures:") {
            root = false;
        } else if t.starts_with("=====") || t.starts_with("*****") {
            // A border ends a block only after its entries.
        }
        let is_entry = t.starts_with('[')
            && t.ends_with("]:")
            && t[1..t.len() - 2].chars().all(|c| c.is_ascii_digit())
            && t.len() > 3;
        // An entry whose `[k]:` header was cut off (a pasted excerpt starting at its
        // `rank :` field): a rank field with its local rank, then `exitcode`.
        let headless = !is_entry
            && rank_line(lines[i]).is_ok_and(|(_, (_, lr))| lr.is_some())
            && lines.get(i + 1).is_some_and(|n| field("exitcode").parse(n).is_ok());
        if !is_entry && !headless {
            i += 1;
            continue;
        }
        let first = i;
        let mut e = Entry {
            rank: 0,
            local_rank: None,
            host: None,
            exitcode: None,
            time: None,
            root_cause: root,
            first,
            last: i,
        };
        let mut has_rank = false;
        let mut j = if headless { i } else { i + 1 };
        while j < lines.len() {
            let l = lines[j];
            let lt = l.trim();
            if lt.is_empty() && j + 1 < lines.len() && !lines[j + 1].starts_with("  ") {
                break;
            }
            if lt.starts_with("-----")
                || lt.starts_with("=====")
                || lt.starts_with("*****")
                || (lt.starts_with('[') && lt.ends_with("]:"))
            {
                break;
            }
            if let Ok((_, (r, lr))) = rank_line(l) {
                e.rank = r;
                e.local_rank = lr;
                has_rank = true;
            } else if let Ok((_, code)) = (field("exitcode"), int).map(|(_, c)| c).parse(l) {
                e.exitcode = Some(code);
            } else if let Ok((rest, ())) = field("time").parse(l) {
                e.time = Some(rest.trim().to_string());
            } else if let Ok((rest, ())) = field("host").parse(l) {
                e.host = Some(rest.trim().to_string()).filter(|h| !h.is_empty());
            }
            e.last = j;
            j += 1;
        }
        if has_rank {
            out.push(e);
        }
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_entries() {
        let text = "Failures:\n[1]:\n  time      : 2026-11-29_16:42:24\n  host      : localhost\n  rank      : 0 (local_rank: 0)\n  exitcode  : -15 (pid: 26402)  (SIGTERM)\n  error_file: <N/A>\n  traceback : Traceback (most recent call last):\n    File \"x.py\", line 3, in f\n  RuntimeError: Connection closed by peer\n  \n------------------------------------------------------------\nRoot Cause (first observed failure):\n[0]:\n  time      : 2026-11-29_16:42:21\n  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 26403) \n==========";
        let lines: Vec<&str> = text.lines().collect();
        let es = entries(&lines);
        assert_eq!(es.len(), 2);
        assert_eq!((es[0].rank, es[0].exitcode, es[0].root_cause), (0, Some(-15), false));
        assert_eq!(es[0].host.as_deref(), Some("localhost"));
        assert!(es[0].last >= 9, "{:?}", es[0]);
        assert_eq!((es[1].rank, es[1].exitcode, es[1].root_cause), (1, Some(1), true));
        let old = "Root Cause:\n[0]:\n  time: 2021-10-15_08:49:21\n  rank: 3 (local_rank: 0)\n  exitcode: 1 (pid: 3465)\n=====";
        let lines: Vec<&str> = old.lines().collect();
        assert_eq!(entries(&lines)[0].rank, 3);
        // Cut above the rank field: still an entry; prose naming a rank is not.
        let cut = "  rank      : 2 (local_rank: 2)\n  exitcode  : -11 (pid: 51873)\n  error_file: <N/A>\n  traceback : Signal 11 (SIGSEGV) received by PID 51873\n=====";
        let lines: Vec<&str> = cut.lines().collect();
        let es = entries(&lines);
        assert_eq!((es.len(), es[0].rank, es[0].local_rank, es[0].exitcode), (1, 2, Some(2), Some(-11)));
        assert_eq!(es[0].last, 3);
        let prose = "rank : 2 (local_rank: 2) is slow\nthe next line\n";
        assert!(entries(&prose.lines().collect::<Vec<_>>()).is_empty());
    }
}
