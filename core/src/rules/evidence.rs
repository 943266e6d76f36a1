//! Evidence: the facts a match and its stream give, as the report carries them.
//!
//! A template's captures go in as they are ([`captures_to_evidence`]); then a few facts
//! are derived from them ([`derive`]): the ATen op and dispatch key behind a codegen
//! wrapper, the device pair in the contract's order, and how fragmented a CUDA heap
//! was. What the whole log showed beyond the kept windows (which needles occurred,
//! whether ranks were seen) is [`LogFacts`].

use serde_json::Value;

use super::template::Match;
use crate::grammar::topology::Topology;
use crate::report::Evidence;

/// Evidence values captured by one match: a list capture appends, a value capture
/// sets its key unless an earlier capture did. A capture whose name starts with `_`
/// serves the template's conditions only and is left out (see
/// [`captures_for_conditions`]).
pub(crate) fn captures_to_evidence(m: &Match, ev: &mut Evidence) {
    for c in m.captures.iter().filter(|c| !c.name.starts_with('_')) {
        if c.list {
            ev.push(&c.name, c.value.clone());
        } else {
            ev.insert_if_absent(&c.name, c.value.clone());
        }
    }
}

/// Every capture of a match, those named `_...` included: what a template's `when` sees.
pub(crate) fn captures_for_conditions(m: &Match, ev: &mut Evidence) {
    for c in &m.captures {
        if c.list {
            ev.push(&c.name, c.value.clone());
        } else {
            ev.insert_if_absent(&c.name, c.value.clone());
        }
    }
}

/// What is known about the whole log beyond the retained windows: which needles
/// occurred anywhere, and whether ranks were seen.
pub(crate) struct LogFacts<'a> {
    /// The needles, in the order of `seen`.
    pub needles: &'a [String],
    pub seen: &'a [bool],
    pub distributed: bool,
    /// The job's shape: nodes, node index, processes per node, hosts.
    pub topology: Topology,
}

impl LogFacts<'_> {
    /// Whether `needle` occurred anywhere in the log.
    pub(crate) fn contains(&self, needle: &str) -> bool {
        self.needles.iter().position(|n| n == needle).is_some_and(|i| self.seen.get(i).copied().unwrap_or(false))
    }
}

/// Facts derived from captures.
pub(crate) fn derive(ev: &mut Evidence) {
    if let Some(k) = ev.kernel.clone() {
        let (key, op) = split_kernel(&k);
        if let Some(key) = key {
            ev.insert_if_absent("dispatch_key", Value::from(key));
        }
        // Legacy TH wrappers: `_th_addmm` is addmm.
        let op = op.trim_start_matches("_thnn_").trim_start_matches("_th_").to_string();
        ev.op.get_or_insert(op);
    }
    // `argument #1 'input' ... but device 1 does not equal 0`: CUDA device indices, the
    // first of the named argument, the second of the tensor it is compared with.
    let int = |ev: &Evidence, k: &str| ev.extra.get(k).and_then(Value::as_i64);
    if let (Some(a), Some(b)) = (int(ev, "device_index_a"), int(ev, "device_index_b")) {
        ev.devices.get_or_insert(vec![format!("cuda:{a}"), format!("cuda:{b}")]);
        if ev.argument.is_some() {
            ev.insert_if_absent("argument_device", Value::from(format!("cuda:{a}")));
            ev.insert_if_absent("common_device", Value::from(format!("cuda:{b}")));
        }
        ev.remove("device_index_a");
        ev.remove("device_index_b");
    }
    // Which device belongs to the named argument and which is the common one. Messages
    // name them in different orders; `devices` keeps the message's order.
    let dev = |ev: &Evidence, k: &str| ev.text(k).map(str::to_string);
    match (dev(ev, "argument_device"), dev(ev, "common_device")) {
        (Some(a), Some(c)) => {
            ev.devices.get_or_insert(vec![a, c]);
        }
        _ => {
            if let Some(d) = ev.devices.clone() {
                if d.len() == 2 && ev.argument.is_some() {
                    ev.insert("common_device", Value::from(d[0].clone()));
                    ev.insert("argument_device", Value::from(d[1].clone()));
                }
            }
        }
    }
    // CUDA heap fragmentation: reserved-but-unallocated memory that is large relative
    // to the GPU makes `expandable_segments` the right advice.
    let get = |k: &str| ev.extra.get(k).and_then(Value::as_u64);
    let unalloc =
        get("unallocated_bytes").or_else(|| Some(get("reserved_bytes")?.saturating_sub(get("allocated_bytes")?)));
    if let (Some(u), Some(total)) = (unalloc, get("total_bytes")) {
        let tried = get("tried_bytes").unwrap_or(0);
        // Large: a tenth of the card, or enough to serve the request and a
        // twentieth of the card (PyTorch's own hint says only "large").
        let high = total > 0 && (u * 10 >= total || (tried > 0 && u >= tried && u * 20 >= total));
        ev.insert("fragmentation", Value::from(if high { "high" } else { "low" }));
        ev.insert("reserved_unallocated_bytes", Value::from(u));
        ev.insert("reserved_unallocated", Value::from(human_bytes(u)));
    }
}

/// Bytes as the CUDA allocator prints them: `512.00 KiB`, `20.00 MiB`, `1.25 GiB`.
pub(crate) fn human_bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if n <= 1024 {
        format!("{n} bytes")
    } else if f <= K * K {
        format!("{:.2} KiB", f / K)
    } else if f <= K * K * K {
        format!("{:.2} MiB", f / (K * K))
    } else {
        format!("{:.2} GiB", f / (K * K * K))
    }
}

/// `wrapper_CUDA__index_select` → (Some("CUDA"), "index_select");
/// `wrapper_addmm` → (None, "addmm"); `wrapper___cat` → (None, "_cat").
pub(crate) fn split_kernel(k: &str) -> (Option<&str>, String) {
    let Some(rest) = k.strip_prefix("wrapper_") else {
        return (None, k.to_string());
    };
    let (key, rest) = match rest.split_once('_') {
        Some((key, r)) if !key.is_empty() && key.chars().next().is_some_and(|c| c.is_ascii_uppercase()) => {
            (Some(key), r)
        }
        _ => (None, rest),
    };
    let op = match rest.strip_prefix('_') {
        Some(r) => r.to_string(),
        None => rest.to_string(),
    };
    (key, op)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels() {
        let table = [
            ("wrapper_CUDA_nll_loss_forward", Some("CUDA"), "nll_loss_forward"),
            ("wrapper_CUDA__index_select", Some("CUDA"), "index_select"),
            ("wrapper_CUDA___embedding_bag", Some("CUDA"), "_embedding_bag"),
            ("wrapper_addmm", None, "addmm"),
            ("wrapper__index_select", None, "index_select"),
            ("wrapper_SparseCUDA__addmm", Some("SparseCUDA"), "addmm"),
            ("addmm", None, "addmm"),
        ];
        for (k, key, op) in table {
            assert_eq!(split_kernel(k), (key, op.to_string()), "{k}");
        }
    }
}
