//! Redaction: share a log without sharing its secrets.
//!
//! [`redact`] replaces home paths and user names, host names, IP addresses, e-mail
//! addresses and credentials (Hugging Face `hf_...`, GitHub `ghp_...`/`github_pat_...`,
//! AWS access keys, W&B keys, `Bearer ...` headers, `token=`/`api_key=`/`password=`
//! assignments) with consistent placeholders (`<user>`, `<host1>`, `<ip2>`, `<email1>`,
//! `<secret>`), keeping ranks, devices, shapes, dtypes, numbers and line structure, so
//! the redacted log diagnoses the same. Two passes: the first learns names from the
//! places that reveal them (home paths, `host :` fields, NCCL line headers, `user@host`),
//! the second replaces every occurrence. [`scrub_secrets`] removes only credentials and
//! is applied to every report's message evidence.

use std::collections::BTreeMap;

use aho_corasick::{AhoCorasick, MatchKind};

/// What was replaced, for the summary `torchdx redact` prints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Redacted {
    /// The log with secrets and identities replaced.
    pub text: String,
    /// Placeholder → how many times it was used.
    pub counts: BTreeMap<String, usize>,
}

const HOME_PREFIXES: &[&str] = &["/home/", "/Users/", "/users/", "C:\\Users\\", "/mnt/home/", "/data/home/"];
/// Users that name a system account, not a person.
const SYSTEM_USERS: &[&str] = &["root", "user", "runner", "ubuntu", "jovyan", "admin", "shared", "work"];
/// Words that sit where a host name would but are not one.
const NOT_HOSTS: &[&str] = &["localhost", "127.0.0.1", "<N/A>", "N/A"];

/// Redacts `text`. Deterministic: the same input gives the same output.
pub fn redact(text: &str) -> Redacted {
    let mut users: Vec<String> = Vec::new();
    let mut hosts: Vec<String> = Vec::new();
    for line in text.lines() {
        learn_users(line, &mut users);
        learn_hosts(line, &mut hosts);
    }
    // Replace learned names (longest first so `node01` wins over `node0`): hosts as
    // whole words anywhere, user names only where a user name stands (after a home
    // prefix, before `@`): a user called `ops` or `data` must not turn `torch.ops` or
    // `/mnt/data` into `<user>`.
    let mut pats: Vec<(String, String)> = Vec::new();
    for u in &users {
        pats.push((u.clone(), "<user>".to_string()));
    }

    for (i, h) in hosts.iter().enumerate() {
        pats.push((h.clone(), format!("<host{}>", i + 1)));
    }
    pats.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = if pats.is_empty() {
        text.to_string()
    } else {
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(pats.iter().map(|(p, _)| p.as_str()))
            .expect("literal patterns always build");
        let mut s = String::with_capacity(text.len());
        let mut last = 0;
        for m in ac.find_iter(text) {
            // Whole words only: `alice` in `/home/alice/` but not in `malice`.
            let before = text[..m.start()].chars().next_back();
            let after = text[m.end()..].chars().next();
            let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-');
            if word(before) || word(after) {
                continue;
            }
            let pat = &pats[m.pattern().as_usize()];
            let user_pos = HOME_PREFIXES.iter().any(|p| text[..m.start()].ends_with(p)) || after == Some('@');
            if pat.1 == "<user>" && !user_pos {
                continue;
            }
            s.push_str(&text[last..m.start()]);
            let repl = &pats[m.pattern().as_usize()].1;
            *counts.entry(repl.clone()).or_default() += 1;
            s.push_str(repl);
            last = m.end();
        }
        s.push_str(&text[last..]);
        s
    };
    out = replace_tokens(&out, &mut counts, true);
    Redacted { text: out, counts }
}

/// Removes credentials only (tokens, keys, bearer headers, `password=`), leaving names
/// and addresses: applied to message evidence in every report.
pub fn scrub_secrets(text: &str) -> String {
    if !might_hold_secret(text) {
        return text.to_string();
    }
    let mut counts = BTreeMap::new();
    replace_tokens(text, &mut counts, false)
}

fn might_hold_secret(t: &str) -> bool {
    [
        "hf_",
        "ghp_",
        "gho_",
        "ghs_",
        "ghu_",
        "github_pat_",
        "AKIA",
        "ASIA",
        "Bearer ",
        "bearer ",
        "token",
        "TOKEN",
        "key=",
        "KEY=",
        "key:",
        "KEY:",
        "password",
        "PASSWORD",
        "secret",
        "SECRET",
    ]
    .iter()
    .any(|p| t.contains(p))
}

fn learn_users(line: &str, users: &mut Vec<String>) {
    for p in HOME_PREFIXES {
        let mut from = 0;
        while let Some(i) = line[from..].find(p) {
            let start = from + i + p.len();
            let name: String =
                line[start..].chars().take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.')).collect();
            if name.len() >= 2 && !SYSTEM_USERS.contains(&name.as_str()) && !users.contains(&name) {
                users.push(name);
            }
            from = start;
        }
    }
}

fn learn_hosts(line: &str, hosts: &mut Vec<String>) {
    let t = line.trim();
    let mut add = |h: &str| {
        let h = h.trim().trim_matches(|c: char| c == '[' || c == ']' || c == ',' || c == ';');
        if h.len() >= 3
            && !NOT_HOSTS.contains(&h)
            && !hosts.iter().any(|x| x == h)
            && h.chars().any(|c| c.is_ascii_alphabetic())
            && !is_ipv4(h)
        {
            hosts.push(h.to_string());
        }
    };
    // torchrun summary: `host      : node01.cluster.example.com`
    if let Some(rest) = t.strip_prefix("host") {
        if let Some(v) = rest.trim_start().strip_prefix(':') {
            add(v);
        }
    }
    // NCCL: `node01:4242:4300 [3] NCCL INFO ...`
    if line.contains(" NCCL ") {
        if let Some(first) = t.split_whitespace().next() {
            let mut parts = first.split(':');
            if let (Some(h), Some(p)) = (parts.next(), parts.next()) {
                if p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty() {
                    add(h);
                }
            }
        }
    }
    // `user@host` in shell prompts and ssh lines (e-mail addresses are handled as such).
    for (i, _) in line.match_indices('@') {
        let host: String =
            line[i + 1..].chars().take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '.')).collect();
        if !host.contains('.') && host.len() >= 3 {
            add(&host);
        }
    }
}

fn is_ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.chars().all(|c| c.is_ascii_digit())
                && p.parse::<u16>().is_ok_and(|n| n <= 255)
        })
}

/// Replaces credentials, and (when `all`) IPv4 addresses and e-mail addresses, scanning
/// word by word.
fn replace_tokens(text: &str, counts: &mut BTreeMap<String, usize>, all: bool) -> String {
    let mut ips: Vec<String> = Vec::new();
    let mut emails: Vec<String> = Vec::new();
    let mut out = String::with_capacity(text.len());
    let mut secret_next = false;
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // Words: runs of characters that can make up a token, address or e-mail.
        let is_tok = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'@' | b'+' | b'/' | b'=');
        if !is_tok(b[i]) {
            let c = text[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        let start = i;
        while i < b.len() && is_tok(b[i]) {
            i += 1;
        }
        let word = &text[start..i];
        if secret_next {
            secret_next = false;
            if word.len() >= 8 {
                bump(counts, "<secret>");
                out.push_str("<secret>");
                continue;
            }
        }
        if let Some(r) = secret_word(word) {
            bump(counts, "<secret>");
            out.push_str(&r);
            if r.ends_with('=') || r.ends_with(':') {
                secret_next = true;
            }
            continue;
        }
        if matches!(word, "Bearer" | "bearer" | "Token" | "token:" | "Basic") && text[i..].starts_with(' ') {
            secret_next = true;
            out.push_str(word);
            continue;
        }
        if all {
            let core = word.trim_end_matches(['.', ',']);
            if is_ipv4(core) {
                let n = index_of(&mut ips, core);
                let p = format!("<ip{n}>");
                bump(counts, &p);
                out.push_str(&p);
                out.push_str(&word[core.len()..]);
                continue;
            }
            if let Some(at) = core.find('@') {
                let (local, domain) = (&core[..at], &core[at + 1..]);
                if !local.is_empty()
                    && domain.contains('.')
                    && domain.split('.').all(|p| !p.is_empty())
                    && !local.contains('/')
                {
                    let n = index_of(&mut emails, core);
                    let p = format!("<email{n}>");
                    bump(counts, &p);
                    out.push_str(&p);
                    out.push_str(&word[core.len()..]);
                    continue;
                }
            }
        }
        out.push_str(word);
    }
    out
}

fn index_of(list: &mut Vec<String>, v: &str) -> usize {
    match list.iter().position(|x| x == v) {
        Some(i) => i + 1,
        None => {
            list.push(v.to_string());
            list.len()
        }
    }
}

fn bump(counts: &mut BTreeMap<String, usize>, k: &str) {
    *counts.entry(k.to_string()).or_default() += 1;
}

/// A word that is or introduces a credential: returns its replacement.
fn secret_word(w: &str) -> Option<String> {
    let alnum_tail = |s: &str, min: usize| s.len() >= min && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    for p in ["hf_", "ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_", "xoxb-", "xoxp-", "sk-"] {
        if let Some(rest) = w.strip_prefix(p) {
            if alnum_tail(rest.trim_end_matches(['.', ',']), 16) || (p == "sk-" && rest.len() >= 20) {
                return Some("<secret>".into());
            }
        }
    }
    if (w.starts_with("AKIA") || w.starts_with("ASIA"))
        && w.len() == 20
        && w[4..].chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    {
        return Some("<secret>".into());
    }
    // KEY=value assignments (`WANDB_API_KEY=...`, `--hf_token=...`, `password=...`).
    if let Some(eq) = w.find('=') {
        let key = w[..eq].trim_start_matches('-').to_ascii_lowercase();
        let val = &w[eq + 1..];
        if is_secret_key(&key) {
            return Some(if val.is_empty() { format!("{}=", &w[..eq]) } else { format!("{}=<secret>", &w[..eq]) });
        }
    }
    if let Some(key) = w.strip_suffix(':') {
        if is_secret_key(&key.to_ascii_lowercase()) {
            return Some(w.to_string() + ":");
        }
    }
    // A bare 40-hex string (W&B API keys) that is not obviously a commit hash context.
    if w.len() == 40 && w.chars().all(|c| c.is_ascii_hexdigit()) && w.chars().any(|c| c.is_ascii_alphabetic()) {
        return Some("<secret>".into());
    }
    None
}

fn is_secret_key(k: &str) -> bool {
    ["token", "api_key", "apikey", "secret", "password", "passwd", "access_key", "auth"]
        .iter()
        .any(|s| k.ends_with(s) || k == *s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_and_keeps_structure() {
        let log = "[rank3]: File \"/home/alice/proj/train.py\", line 9\nhost      : gpu-node-17.corp\nnode17:4242:4300 [3] NCCL INFO Connect to 10.1.2.3<34567>\nexport HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123456\nAuthorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig\nmail alice@example.com; cuda:0 torch.Size([64, 128]) version 2.20.5\nWANDB_API_KEY=0123456789abcdef0123456789abcdef01234567\n";
        let r = redact(log);
        let t = &r.text;
        assert!(!t.contains("alice"), "{t}");
        assert!(!t.contains("gpu-node-17.corp") && !t.contains("node17:"), "{t}");
        assert!(!t.contains("10.1.2.3") && t.contains("<ip1>"), "{t}");
        assert!(!t.contains("hf_abc") && !t.contains("eyJhbGci") && !t.contains("0123456789abcdef0123"), "{t}");
        assert!(
            t.contains("[rank3]:")
                && t.contains("cuda:0")
                && t.contains("torch.Size([64, 128])")
                && t.contains("2.20.5"),
            "{t}"
        );
        assert_eq!(t.lines().count(), log.lines().count());
        assert_eq!(redact(t).text, *t, "redaction is stable on its own output");
    }

    /// A user name that is an ordinary word is replaced in its path, not everywhere.
    #[test]
    fn a_user_name_is_replaced_where_it_stands_only() {
        let log = "  File \"/home/ops/gnn/train.py\", line 5\n    torch.ops.load_library(spec.origin)\nssh ops@gpu-3 ok; /mnt/ops/data\n";
        let t = redact(log).text;
        assert!(t.contains("/home/<user>/gnn/train.py"), "{t}");
        assert!(t.contains("torch.ops.load_library") && t.contains("/mnt/ops/data"), "{t}");
        assert!(t.contains("<user>@"), "{t}");
    }

    #[test]
    fn secrets_only() {
        assert_eq!(scrub_secrets("login with token=abcdef123456 failed"), "login with token=<secret> failed");
        assert_eq!(scrub_secrets("shapes (4x3 and 5x6)"), "shapes (4x3 and 5x6)");
    }
}
