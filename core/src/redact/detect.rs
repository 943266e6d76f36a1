//! The detectors: where in one line a secret, an identity or an address stands.
//!
//! Each detector is a small function over the line that returns spans; [`hits`] merges
//! them (earliest first, the longer of two that start together) so a value is replaced
//! once. Structure decides where it can (a token's prefix and length, an address's
//! syntax); a key name decides where structure cannot (`password: hunter2`), and then the
//! value must look like data, not code or a number.

use std::collections::BTreeSet;
use std::net::Ipv6Addr;

use super::Class;

/// What a span holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum What {
    User,
    Host,
    Ip(Class),
    Email,
    PrivateKey,
    Secret(Class),
}

/// A span of the line to replace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hit {
    pub start: usize,
    pub end: usize,
    pub what: What,
}

/// Host names learned so far (lowercase).
#[derive(Debug, Default)]
pub(super) struct Known {
    hosts: BTreeSet<String>,
    /// SLURM hostlists as printed (`gpu-node-[01-04,07]`): replaced whole.
    lists: Vec<String>,
}

/// Where SLURM prints a hostlist: the value runs to the next space or quote.
const HOSTLIST_KEYS: &[&str] =
    &["NODELIST=", "NodeList=", "--nodelist=", "--nodelist ", " -w ", "--nodes-list=", "SLURM_NODELIST ", "nodelist: "];

/// At most this many hosts are learned from one compressed hostlist.
const MAX_EXPANDED: usize = 4096;

/// `gpu-[01-03,7]x` → `gpu-01x`, `gpu-02x`, `gpu-03x`, `gpu-7x` (zero padding kept).
fn expand_hostlist(item: &str, out: &mut Vec<String>) {
    let (Some(open), Some(close)) = (item.find('['), item.find(']')) else {
        out.push(item.to_string());
        return;
    };
    if close < open {
        return;
    }
    let (prefix, ranges, suffix) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    for r in ranges.split(',') {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        let (Ok(x), Ok(y)) = (a.parse::<u64>(), b.parse::<u64>()) else { continue };
        for n in x..=y.min(x + MAX_EXPANDED as u64) {
            if out.len() >= MAX_EXPANDED {
                return;
            }
            out.push(format!("{prefix}{n:0width$}{suffix}", width = a.len()));
        }
    }
}

const HOME_PREFIXES: &[&str] = &["/home/", "/Users/", "/users/", "C:\\Users\\", "/mnt/home/", "/data/home/"];
/// Users that name a system account, not a person.
const SYSTEM_USERS: &[&str] =
    &["root", "user", "runner", "ubuntu", "jovyan", "admin", "shared", "work", "git", "nobody", "ec2-user", "centos"];
/// Names that sit where a host would but identify nobody.
const NOT_HOSTS: &[&str] =
    &["localhost", "localhost.localdomain", "n/a", "<n/a>", "none", "null", "unknown", "0.0.0.0"];
/// Public domains that logs link to (documentation, downloads): not private hosts.
const PUBLIC_DOMAINS: &[&str] = &[
    "pytorch.org",
    "github.com",
    "githubusercontent.com",
    "huggingface.co",
    "hf.co",
    "python.org",
    "pypi.org",
    "nvidia.com",
    "anaconda.org",
    "anaconda.com",
    "conda.io",
    "readthedocs.io",
    "microsoft.com",
    "google.com",
    "tensorflow.org",
    "wandb.ai",
    "deepspeed.ai",
    "lightning.ai",
    "example.org",
    // Webhook services: the host says where a notification went; the path is the
    // credential and goes (see `webhooks`).
    "slack.com",
    "discord.com",
    "office.com",
];
/// Top-level labels that make a dotted word a host name.
const TLDS: &[&str] = &[
    "com",
    "net",
    "org",
    "io",
    "ai",
    "edu",
    "gov",
    "co",
    "us",
    "uk",
    "de",
    "fr",
    "cn",
    "jp",
    "kr",
    "in",
    "ru",
    "ca",
    "au",
    "ch",
    "nl",
    "se",
    "eu",
    "cloud",
    "dev",
    "app",
    "tech",
    "internal",
    "local",
    "lan",
    "corp",
    "cluster",
    "intranet",
    "localdomain",
    "home",
    "priv",
];
/// Top-level labels that only private networks use: one dot is enough.
const PRIVATE_TLDS: &[&str] = &["internal", "local", "lan", "corp", "cluster", "intranet", "localdomain", "priv"];
/// Words after which a dotted quad is a version, not an address.
const VERSION_WORDS: &[&str] = &[
    "version", "ver", "v", "cudnn", "tensorrt", "nccl", "cuda", "driver", "torch", "python", "nvcc", "release",
    "build", "libcudnn", "cublas", "cufft", "mkl", "onnx", "triton", "rocm", "hip", "miopen", "cutlass", "toolkit",
];

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Byte `i` of `b` is at a word boundary on its left.
fn left_edge(b: &[u8], i: usize) -> bool {
    i == 0 || !is_word_byte(b[i - 1])
}

impl Known {
    /// Learns the host names `line` names in the places that name hosts.
    pub(super) fn learn(&mut self, line: &str) {
        if !line.bytes().any(|c| matches!(c, b':' | b'@' | b'=' | b' ')) {
            return;
        }
        let t = line.trim();
        // torchrun summary `host      : node01`; `hostname: x`; `Host x`.
        for key in ["host", "hostname", "Host", "Hostname", "HOSTNAME"] {
            let Some(rest) = t.strip_prefix(key) else { continue };
            if !rest.starts_with([' ', ':', '=']) {
                continue;
            }
            let rest = rest.trim_start();
            let (v, bare) = match rest.strip_prefix(':').or_else(|| rest.strip_prefix('=')) {
                Some(v) => (v, false),
                None => (rest, true),
            };
            if let Some(w) = v.split_whitespace().next() {
                // `host gpu-3.corp` names one; `host memory is low` is prose.
                if !bare || w.bytes().any(|c| c.is_ascii_digit() || c == b'-' || c == b'.') {
                    self.add(w);
                }
            }
        }
        // NCCL: `node01:4242:4300 [3] NCCL INFO ...`
        if line.contains(" NCCL ") {
            if let Some(first) = t.split_whitespace().next() {
                let mut parts = first.split(':');
                if let (Some(h), Some(p)) = (parts.next(), parts.next()) {
                    if !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()) {
                        self.add(h);
                    }
                }
            }
        }
        // srun / slurmstepd / MPI: `srun: error: gpu-node-17: task 3: Exited`,
        // `*** JOB 42 ON gpu-node-17 CANCELLED`, `on node gpu-3`, `on host gpu-3`.
        if let Some(rest) = t.strip_prefix("srun: error: ") {
            if let Some((h, tail)) = rest.split_once(": ") {
                if tail.starts_with("task") || tail.starts_with("tasks") {
                    self.add(h);
                }
            }
        }
        for marker in [" ON ", " on node ", " on host ", " Node ", " node "] {
            let mut from = 0;
            while let Some(i) = line[from..].find(marker) {
                let at = from + i + marker.len();
                let w: String =
                    line[at..].chars().take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '.' | '_')).collect();
                // A host name here has a digit or a dash (`gpu-3`, `node17`): `on node
                // failure` is prose.
                if w.bytes().any(|c| c.is_ascii_digit() || c == b'-') && w.bytes().any(|c| c.is_ascii_alphabetic()) {
                    self.add(w.trim_end_matches('.'));
                }
                from = at;
            }
        }
        // Key/value forms: `MASTER_ADDR=gpu-1`, `SLURMD_NODENAME=x`, `--master_addr x`.
        if line.contains('=') {
            for p in pairs(line, |k| {
                matches!(
                    k,
                    "master_addr"
                        | "hostname"
                        | "nodename"
                        | "slurmd_nodename"
                        | "slurm_submit_host"
                        | "submit_host"
                        | "node_name"
                )
            }) {
                self.add(&line[p.value.0..p.value.1]);
            }
        }
        // SLURM hostlists: `SLURM_JOB_NODELIST=gpu-node-[01-04]`, `srun -w gpu-3,gpu-4`.
        for key in HOSTLIST_KEYS {
            let mut from = 0;
            while let Some(i) = line[from..].find(key) {
                let s = from + i + key.len();
                from = s;
                let n =
                    line[s..].bytes().take_while(|c| !c.is_ascii_whitespace() && !matches!(c, b'"' | b'\'')).count();
                self.add_hostlist(&line[s..s + n]);
            }
        }
        // torchrun's `[host:3]:` line prefix (`--log-line-prefix-template`).
        if let Some(rest) = t.strip_prefix('[') {
            if let Some((h, tail)) = rest.split_once(':') {
                if tail.split_once("]:").is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit())) {
                    self.add(h);
                }
            }
        }
        // `user@host` (not an e-mail, not a decorator).
        for (i, _) in line.match_indices('@') {
            let b = line.as_bytes();
            if i == 0 || !is_user_byte(b[i - 1]) {
                continue;
            }
            let host: String =
                line[i + 1..].chars().take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '.')).collect();
            let host = host.trim_end_matches('.');
            if !is_email_domain(host) && user_at_host(line, host) {
                self.add(host);
            }
        }
        // URLs: `http://gpu-node-3:8265/`, `tcp://trainer-0.cluster:29500`.
        let mut from = 0;
        while let Some(i) = line[from..].find("://") {
            let s = from + i + 3;
            from = s;
            let rest = &line[s..];
            let end = rest.find(['/', ' ', '"', '\'', '?', '#', ')', ']', '>']).unwrap_or(rest.len());
            let auth = &rest[..end];
            let hostport = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
            let host = hostport.split(':').next().unwrap_or("");
            if !host.is_empty() && !host.starts_with('[') {
                self.add(host);
            }
        }
    }

    fn add_hostlist(&mut self, list: &str) {
        // Top-level commas separate items; commas inside brackets separate ranges.
        let (mut depth, mut start) = (0i32, 0);
        let mut items = Vec::new();
        for (i, c) in list.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&list[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        items.push(&list[start..]);
        for item in items.into_iter().filter(|i| !i.is_empty()) {
            if item.contains('[') {
                if !self.lists.iter().any(|l| l == item) && self.lists.len() < 64 && item.len() <= 256 {
                    self.lists.push(item.to_string());
                }
                let mut hosts = Vec::new();
                expand_hostlist(item, &mut hosts);
                for h in hosts {
                    self.add(&h);
                }
            } else {
                self.add(item);
            }
        }
    }

    fn add(&mut self, h: &str) {
        let h = h.trim().trim_matches(|c: char| matches!(c, '[' | ']' | ',' | ';' | '"' | '\'' | '(' | ')'));
        let h = h.trim_end_matches('.');
        let lower = h.to_ascii_lowercase();
        if h.len() >= 2
            && h.len() <= 253
            && !NOT_HOSTS.contains(&lower.as_str())
            && h.bytes().any(|c| c.is_ascii_alphabetic())
            && h.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
            && !h.starts_with('-')
            && !is_ipv4(h)
            && !is_public(&lower)
            && !self.hosts.contains(&lower)
        {
            // A FQDN teaches its first label too (`gpu-3.corp` → `gpu-3` alone).
            if let Some((first, _)) = lower.split_once('.') {
                if first.len() >= 3 && first.bytes().any(|c| c.is_ascii_digit() || c == b'-') {
                    self.hosts.insert(first.to_string());
                }
            }
            self.hosts.insert(lower);
        }
    }

    fn is_host(&self, w: &str) -> bool {
        !self.hosts.is_empty() && w.len() >= 2 && w.len() <= 253 && self.hosts.contains(&w.to_ascii_lowercase())
    }
}

/// `name@host` is a user at a host (not Python's `x@w`): the host looks like one, or
/// the line is a shell's (`ssh`, `scp`, a prompt).
fn user_at_host(line: &str, host: &str) -> bool {
    host.len() >= 2
        && (host.bytes().any(|c| c.is_ascii_digit() || c == b'-' || c == b'.')
            || ["ssh ", "scp ", "rsync ", "sftp ", ":~", "$ "].iter().any(|m| line.contains(m)))
}

fn is_user_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')
}

fn is_public(lower: &str) -> bool {
    PUBLIC_DOMAINS.iter().any(|d| lower == *d || lower.ends_with(&format!(".{d}")))
}

/// Every span to replace in `line`, in order and not overlapping.
pub(super) fn hits(line: &str, known: &Known) -> Vec<Hit> {
    let mut v = Vec::new();
    credentials(line, &mut v);
    users(line, &mut v);
    emails_and_user_at_host(line, known, &mut v);
    addresses_and_hosts(line, known, &mut v);
    for list in &known.lists {
        for (s, _) in line.match_indices(list.as_str()) {
            v.push(Hit { start: s, end: s + list.len(), what: What::Host });
        }
    }
    v.retain(|h| !is_placeholder(&line[h.start..h.end]));
    merge(v)
}

/// A placeholder of an earlier redaction (`<secret2>`, `<user>`): redacting a redacted
/// log changes nothing.
fn is_placeholder(t: &str) -> bool {
    let Some(name) = t.strip_prefix('<').and_then(|t| t.strip_suffix('>')) else { return false };
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
    matches!(stem, "user" | "host" | "ip" | "email" | "secret" | "private-key")
}

/// The spans that hold credentials (structured tokens, key/value secrets, headers, URL
/// credentials, command-line credentials, private keys), in order and not overlapping.
pub(super) fn secrets(line: &str) -> Vec<Hit> {
    let mut v = Vec::new();
    credentials(line, &mut v);
    v.retain(|h| !is_placeholder(&line[h.start..h.end]));
    let mut v = merge(v);
    v.retain(|h| matches!(h.what, What::Secret(_) | What::PrivateKey));
    v
}

fn credentials(line: &str, v: &mut Vec<Hit>) {
    if line.len() < 6 {
        return;
    }
    tokens(line, v);
    key_values(line, v);
    headers_and_schemes(line, v);
    urls(line, v);
    webhooks(line, v);
    command_lines(line, v);
    pem_inline(line, v);
}

fn merge(mut v: Vec<Hit>) -> Vec<Hit> {
    // Earliest first; of two that start together the longer, then the secret (a value
    // that is both a user and a password is a password).
    let rank = |w: What| u8::from(!matches!(w, What::Secret(_) | What::PrivateKey));
    v.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)).then(rank(a.what).cmp(&rank(b.what))));
    let mut out: Vec<Hit> = Vec::with_capacity(v.len());
    for h in v {
        if h.start >= h.end {
            continue;
        }
        if out.last().is_some_and(|p| h.start < p.end) {
            continue;
        }
        out.push(h);
    }
    out
}

/// Runs of `pred` bytes in `line`: (start, end).
fn runs<'a>(line: &'a str, pred: impl Fn(u8) -> bool + 'a) -> impl Iterator<Item = (usize, usize)> + 'a {
    let b = line.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() && !pred(b[i]) {
            i += 1;
        }
        if i >= b.len() {
            return None;
        }
        let s = i;
        while i < b.len() && pred(b[i]) {
            i += 1;
        }
        Some((s, i))
    })
}

fn token_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'+' | b'/' | b'=')
}

fn alnum(s: &str) -> bool {
    s.bytes().all(|c| c.is_ascii_alphanumeric())
}

/// Structured tokens, recognised by prefix, alphabet and length.
fn tokens(line: &str, v: &mut Vec<Hit>) {
    for (s, e) in runs(line, |c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')) {
        let w = line[s..e].trim_end_matches('.');
        let end = s + w.len();
        if let Some(class) = token_class(w) {
            v.push(Hit { start: s, end, what: What::Secret(class) });
        }
    }
}

fn token_class(w: &str) -> Option<Class> {
    let tail_ok = |rest: &str, min: usize| rest.len() >= min && alnum(rest);
    let mixed = |s: &str| s.bytes().any(|c| c.is_ascii_digit()) && s.bytes().any(|c| c.is_ascii_alphabetic());
    for p in ["ghp_", "gho_", "ghs_", "ghu_", "ghr_"] {
        if let Some(rest) = w.strip_prefix(p) {
            return tail_ok(rest, 20).then_some(Class::GithubToken);
        }
    }
    if let Some(rest) = w.strip_prefix("github_pat_") {
        return (rest.len() >= 22 && rest.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'))
            .then_some(Class::GithubToken);
    }
    for p in ["glpat-", "gldt-", "glptt-", "glrt-", "gloas-"] {
        if let Some(rest) = w.strip_prefix(p) {
            return (rest.len() >= 20 && rest.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-')))
                .then_some(Class::GitlabToken);
        }
    }
    for p in ["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe-"] {
        if let Some(rest) = w.strip_prefix(p) {
            return (rest.len() >= 10 && mixed(rest)).then_some(Class::SlackToken);
        }
    }
    for p in ["sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_", "pk_test_"] {
        if let Some(rest) = w.strip_prefix(p) {
            return tail_ok(rest, 16).then_some(Class::StripeKey);
        }
    }
    if let Some(rest) = w.strip_prefix("sk-") {
        // `sk-proj-...`, `sk-ant-api03-...`, `sk-` + 48: long, mixed, few dashes
        // (`sk-learn-extra` is a package).
        let body = rest.strip_prefix("proj-").or_else(|| rest.strip_prefix("ant-")).unwrap_or(rest);
        let dashes = body.bytes().filter(|&c| c == b'-').count();
        return (body.len() >= 20 && mixed(body) && dashes <= body.len() / 8 + 1).then_some(Class::AiApiKey);
    }
    if let Some(rest) = w.strip_prefix("AIza") {
        return (rest.len() >= 30 && rest.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-')))
            .then_some(Class::GoogleApiKey);
    }
    if let Some(rest) = w.strip_prefix("hf_") {
        return (tail_ok(rest, 30) && mixed(rest)).then_some(Class::HuggingfaceToken);
    }
    if let Some(rest) = w.strip_prefix("npm_") {
        return tail_ok(rest, 30).then_some(Class::NpmToken);
    }
    if w.starts_with("pypi-AgE") && w.len() >= 50 {
        return Some(Class::PypiToken);
    }
    if w.len() == 20
        && ["AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"]
            .iter()
            .any(|p| w.starts_with(p))
        && w[4..].bytes().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    {
        return Some(Class::AwsAccessKey);
    }
    if w.starts_with("eyJ") {
        let parts: Vec<&str> = w.split('.').collect();
        if parts.len() == 3 && parts[0].len() >= 10 && parts[1].len() >= 4 {
            return Some(Class::Jwt);
        }
    }
    None
}

/// Lowercase, `-` as `_`, no leading dashes: `--HF-Token` → `hf_token`.
fn norm_key(k: &str) -> String {
    k.trim_start_matches('-').to_ascii_lowercase().replace('-', "_")
}

fn key_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-')
}

/// Longest key and value a pair is read with: per-separator work stays bounded on a
/// line of a million `a=`.
const MAX_KEY: usize = 128;
const MAX_VALUE: usize = 4096;

/// `key = value`, `key: value`, `"key": "value"`, `KEY=value`: a pair of a line whose
/// normalised key `want` accepts (the value is read only then).
struct Pair {
    /// The key, normalised ([`norm_key`]).
    name: String,
    value: (usize, usize),
    quoted: bool,
    /// Spaces around the separator (`x = y`): Python code looks like this.
    spaced: bool,
    sep: u8,
    /// The key starts a URL's authority (`https://user:pass@host`): `urls` reads it.
    in_url: bool,
}

fn pairs(line: &str, want: impl Fn(&str) -> bool) -> Vec<Pair> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    for (at, &c) in b.iter().enumerate() {
        if c != b'=' && c != b':' {
            continue;
        }
        // `==`, `:=`, `::`, `://` and `<=` are operators and schemes, not separators.
        let next = b.get(at + 1).copied();
        let prev = at.checked_sub(1).map(|p| b[p]);
        if matches!(next, Some(b'=') | Some(b':'))
            || matches!(prev, Some(b'=' | b':' | b'<' | b'>' | b'!' | b'+' | b'-' | b'*'))
            || (c == b':' && next == Some(b'/') && b.get(at + 2) == Some(&b'/'))
        {
            continue;
        }
        // The key: before optional spaces and a closing quote.
        let mut k = at;
        while k > 0 && b[k - 1] == b' ' {
            k -= 1;
        }
        let spaced_before = k < at;
        let quoted_key = k > 0 && matches!(b[k - 1], b'"' | b'\'');
        if quoted_key {
            k -= 1;
        }
        let key_end = k;
        while k > 0 && key_end - k < MAX_KEY && key_byte(b[k - 1]) {
            k -= 1;
        }
        if k == key_end {
            continue;
        }
        let name = norm_key(&line[k..key_end]);
        if !want(&name) {
            continue;
        }
        // The value: after optional spaces and an opening quote.
        let mut s = at + 1;
        while s < b.len() && b[s] == b' ' {
            s += 1;
        }
        let spaced = spaced_before || s > at + 1;
        let quote = b.get(s).copied().filter(|q| matches!(q, b'"' | b'\''));
        let (vs, ve) = if let Some(q) = quote {
            let vs = s + 1;
            let window = &b[vs..b.len().min(vs + MAX_VALUE)];
            let Some(n) = memchr::memchr(q, window) else { continue };
            (vs, vs + n)
        } else {
            let mut e = s;
            while e < b.len()
                && e - s < MAX_VALUE
                && !matches!(b[e], b' ' | b'\t' | b',' | b';' | b'&' | b')' | b']' | b'}' | b'"' | b'\'')
            {
                e += 1;
            }
            (s, e)
        };
        let in_url = line[..k].ends_with("://");
        out.push(Pair { name, value: (vs, ve), quoted: quote.is_some(), spaced, sep: c, in_url });
    }
    out
}

/// Keys whose value is a user name.
const USER_KEYS: &[&str] =
    &["user", "username", "user_name", "logname", "slurm_job_user", "sudo_user", "login_user", "pbs_o_logname"];

/// The key names a secret: its class.
fn secret_key(k: &str) -> Option<Class> {
    if ["password", "passwd", "pwd", "passphrase"].iter().any(|s| k.ends_with(s)) {
        return Some(Class::Password);
    }
    const SECRET_SUFFIXES: &[&str] = &[
        "token",
        "secret",
        "api_key",
        "apikey",
        "access_key",
        "secret_key",
        "private_key",
        "credential",
        "credentials",
        "accountkey",
        "account_key",
        "client_secret",
        "auth_key",
        "license_key",
        "signature",
    ];
    SECRET_SUFFIXES.iter().any(|s| k.ends_with(s) || k == *s).then_some(Class::SecretValue)
}

/// Whether `v` (a value under a secret key) is data that could be a secret, not a
/// number, a flag, a placeholder or code.
fn secret_value(line: &str, p: &Pair, min_len: usize) -> bool {
    let v = &line[p.value.0..p.value.1];
    let b = line.as_bytes();
    let lower = v.to_ascii_lowercase();
    if v.len() < min_len
        || (min_len > 1 && v.bytes().all(|c| c.is_ascii_digit() || c == b'.' || c == b'-'))
        || matches!(lower.as_str(), "true" | "false" | "none" | "null" | "nil" | "yes" | "no" | "required" | "optional")
        || v.starts_with(['<', '[', '{', '(', '$', '%', '*', '#'])
        || v.starts_with("...")
        || v.contains('(')
        || v.contains("://")
    {
        return false;
    }
    if !p.quoted {
        // Code: `token = tokenizer(text)`, `password: str = field(...)`, `args.token`.
        let after = b.get(p.value.1).copied();
        if matches!(after, Some(b'(') | Some(b'[')) {
            return false;
        }
        let ident_path =
            v.split('.').all(|s| !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'))
                && v.contains('.');
        if ident_path && v.bytes().next().is_some_and(|c| c.is_ascii_alphabetic()) && !v.ends_with('.') {
            return false;
        }
        // `token = x` with spaces in code: only a value that looks generated.
        if p.spaced && p.sep == b'=' && !(v.len() >= 12 && v.bytes().any(|c| c.is_ascii_digit())) {
            return false;
        }
        // `password: str` (a type annotation) or the key's own name (`api_key=api_key`).
        if matches!(lower.as_str(), "str" | "string" | "optional[str]" | "int" | "bytes") || lower == p.name {
            return false;
        }
    }
    true
}

fn key_values(line: &str, v: &mut Vec<Hit>) {
    if !line.bytes().any(|c| c == b'=' || c == b':') {
        return;
    }
    for p in pairs(line, |k| secret_key(k).is_some() || USER_KEYS.contains(&k)) {
        // `https://x-access-token:TOKEN@github.com/o/r`: the URL's own reader keeps the
        // host and path and takes the token.
        if p.in_url {
            continue;
        }
        if let Some(class) = secret_key(&p.name) {
            // A password may be short (`passwd=pw0`); a token under a generic key is not.
            let min = if class == Class::Password { 1 } else { 4 };
            if secret_value(line, &p, min) {
                v.push(Hit { start: p.value.0, end: p.value.1, what: What::Secret(class) });
            }
        } else {
            let val = &line[p.value.0..p.value.1];
            let after = line.as_bytes().get(p.value.1).copied();
            if val.len() >= 2
                && val.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
                && !SYSTEM_USERS.contains(&val)
                && ((p.sep == b'=' && !p.spaced) || (p.sep == b':' && p.spaced))
                && after != Some(b'(')
            {
                v.push(Hit { start: p.value.0, end: p.value.1, what: What::User });
            }
        }
    }
}

/// `Authorization: Basic ...`, `Cookie: ...`, and `Bearer`/`Token` credentials anywhere.
fn headers_and_schemes(line: &str, v: &mut Vec<Hit>) {
    let lower = line.to_ascii_lowercase();
    for (name, class) in [
        ("proxy-authorization:", Class::AuthHeader),
        ("authorization:", Class::AuthHeader),
        ("set-cookie:", Class::Cookie),
        ("cookie:", Class::Cookie),
    ] {
        let mut from = 0;
        while let Some(i) = lower[from..].find(name) {
            let at = from + i;
            from = at + name.len();
            if !left_edge(lower.as_bytes(), at) && lower.as_bytes()[at - 1] != b'-' {
                continue;
            }
            let mut s = from;
            while s < line.len() && line.as_bytes()[s] == b' ' {
                s += 1;
            }
            // Keep the scheme: `Authorization: Basic <secret1>`.
            if class == Class::AuthHeader {
                if let Some(sp) = line[s..].find(' ') {
                    let scheme = &lower[s..s + sp];
                    if matches!(scheme, "basic" | "bearer" | "token" | "digest" | "negotiate" | "aws4-hmac-sha256") {
                        s += sp + 1;
                    }
                }
            }
            let e = line[s..].find(['"', '\'']).map_or(line.len(), |n| s + n);
            let e = s + line[s..e].trim_end().len();
            if e > s {
                v.push(Hit { start: s, end: e, what: What::Secret(class) });
            }
        }
    }
    for scheme in ["Bearer ", "bearer ", "Basic ", "Token "] {
        let mut from = 0;
        while let Some(i) = line[from..].find(scheme) {
            let s = from + i + scheme.len();
            from = s;
            let e = s + line[s..].bytes().take_while(|&c| token_byte(c)).count();
            let w = &line[s..e];
            if w.len() >= 12 && w.bytes().any(|c| c.is_ascii_digit()) {
                v.push(Hit { start: s, end: e, what: What::Secret(Class::AuthHeader) });
            }
        }
    }
}

/// `scheme://user:pass@host`, `scheme://TOKEN@host`: the credential, and the user.
fn urls(line: &str, v: &mut Vec<Hit>) {
    let mut from = 0;
    while let Some(i) = line[from..].find("://") {
        let s = from + i + 3;
        from = s;
        let rest = &line[s..];
        let auth_end = rest.find(['/', ' ', '"', '\'', '?', '#']).unwrap_or(rest.len());
        let Some(at) = rest[..auth_end].rfind('@') else { continue };
        let info = &rest[..at];
        if info.is_empty() || info.starts_with('<') {
            continue;
        }
        match info.split_once(':') {
            Some((user, pass)) => {
                // `x-access-token`, `oauth2`, `apikey`: a token's label, not a person.
                if !user.is_empty() && !SYSTEM_USERS.contains(&user) && !URL_TOKEN_USERS.contains(&user) {
                    v.push(Hit { start: s, end: s + user.len(), what: What::User });
                }
                if !pass.is_empty() {
                    let ps = s + user.len() + 1;
                    v.push(Hit { start: ps, end: ps + pass.len(), what: What::Secret(Class::UrlCredential) });
                }
            }
            None if info.len() >= 16 => {
                v.push(Hit { start: s, end: s + info.len(), what: What::Secret(Class::UrlCredential) })
            }
            None if !SYSTEM_USERS.contains(&info) => v.push(Hit { start: s, end: s + info.len(), what: What::User }),
            None => {}
        }
    }
}

/// User names a URL carries to label a token, not to name someone.
const URL_TOKEN_USERS: &[&str] =
    &["x-access-token", "oauth2", "x-oauth-basic", "apikey", "api", "token", "gitlab-ci-token"];

/// Webhook URLs whose path is the credential: Slack's `hooks.slack.com/services/T/B/X`,
/// Discord's `discord.com/api/webhooks/ID/TOKEN`, Teams' `webhook.office.com/webhookb2/...`.
fn webhooks(line: &str, v: &mut Vec<Hit>) {
    for marker in [
        "hooks.slack.com/services/",
        "discord.com/api/webhooks/",
        "discordapp.com/api/webhooks/",
        ".webhook.office.com/webhookb2/",
    ] {
        let mut from = 0;
        while let Some(i) = line[from..].find(marker) {
            let s = from + i + marker.len();
            let n = line[s..]
                .bytes()
                .take_while(|&c| c.is_ascii_alphanumeric() || matches!(c, b'/' | b'_' | b'-' | b'@'))
                .count();
            if n >= 8 {
                v.push(Hit { start: s, end: s + n, what: What::Secret(Class::UrlCredential) });
            }
            from = s;
        }
    }
}

/// `curl -u user:pass`, `--user user:pass`, `--password X`, `--hf-token X`,
/// `wandb login KEY`.
fn command_lines(line: &str, v: &mut Vec<Hit>) {
    let words: Vec<(usize, &str)> = runs(line, |c| !c.is_ascii_whitespace()).map(|(s, e)| (s, &line[s..e])).collect();
    for pair in words.windows(2) {
        let ((_, flag), (vs, val)) = (pair[0], pair[1]);
        let val_trim = val.trim_matches(['"', '\'']);
        let vs = vs + (val.len() - val.trim_start_matches(['"', '\'']).len());
        if matches!(flag, "-u" | "--user" | "--proxy-user") {
            if let Some((u, p)) = val_trim.split_once(':').filter(|(u, _)| !u.starts_with('<')) {
                if !u.is_empty() {
                    v.push(Hit { start: vs, end: vs + u.len(), what: What::User });
                }
                if !p.is_empty() && !p.starts_with('<') {
                    v.push(Hit {
                        start: vs + u.len() + 1,
                        end: vs + val_trim.len(),
                        what: What::Secret(Class::Password),
                    });
                }
            }
            continue;
        }
        if flag.starts_with("--") && !val.starts_with('-') && !flag.contains('=') {
            if let Some(class) = secret_key(&norm_key(flag)) {
                let p = Pair {
                    name: String::new(),
                    value: (vs, vs + val_trim.len()),
                    quoted: true,
                    spaced: false,
                    sep: b'=',
                    in_url: false,
                };
                if secret_value(line, &p, 4) {
                    v.push(Hit { start: vs, end: vs + val_trim.len(), what: What::Secret(class) });
                }
            }
        }
        if flag == "login" && val_trim.len() >= 32 && alnum(val_trim) {
            v.push(Hit { start: vs, end: vs + val_trim.len(), what: What::Secret(Class::SecretValue) });
        }
    }
}

/// A PEM block on one line (`"-----BEGIN PRIVATE KEY-----\nMIIE...\n-----END..."`).
fn pem_inline(line: &str, v: &mut Vec<Hit>) {
    let Some(b) = line.find("PRIVATE KEY-----") else { return };
    let s = b + "PRIVATE KEY-----".len();
    let e = line[s..].find("-----END").map_or(line.len(), |n| s + n);
    let body = line[s..e].trim_end_matches(['"', '\'']);
    if body.trim().len() >= 16 {
        v.push(Hit { start: s, end: s + body.len(), what: What::PrivateKey });
    }
}

/// The line opens a PEM private key block.
pub(super) fn opens_pem(line: &str) -> bool {
    line.contains("-----BEGIN ") && line.contains("PRIVATE KEY-----")
}

/// The line also closes it.
pub(super) fn closes_pem(line: &str) -> bool {
    line.contains("-----END ")
}

/// A PEM body line: base64.
pub(super) fn pem_body(t: &str) -> bool {
    t.len() >= 8 && t.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='))
}

/// Home paths: the user name after `/home/`.
fn users(line: &str, v: &mut Vec<Hit>) {
    for p in HOME_PREFIXES {
        let mut from = 0;
        while let Some(i) = line[from..].find(p) {
            let s = from + i + p.len();
            from = s;
            let n =
                line[s..].bytes().take_while(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')).count();
            let name = &line[s..s + n];
            if name.len() >= 2 && !SYSTEM_USERS.contains(&name) {
                v.push(Hit { start: s, end: s + n, what: What::User });
            }
        }
    }
}

fn is_email_domain(d: &str) -> bool {
    let labels: Vec<&str> = d.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|l| !l.is_empty())
        && labels.last().is_some_and(|t| t.len() >= 2 && t.bytes().all(|c| c.is_ascii_alphabetic()))
}

/// `local@domain.tld` (e-mail), `user@host` (a user and a host), never `@decorator`.
fn emails_and_user_at_host(line: &str, known: &Known, v: &mut Vec<Hit>) {
    let b = line.as_bytes();
    if memchr::memchr(b'@', b).is_none() {
        return;
    }
    // Each URL's authority (`scheme://` up to the next `/` or space): (start, end).
    let schemes: Vec<(usize, usize)> = line
        .match_indices("://")
        .map(|(u, _)| (u, line[u + 3..].find(['/', ' ']).map_or(line.len(), |n| u + 3 + n)))
        .collect();
    for (i, _) in line.match_indices('@') {
        let mut s = i;
        while s > 0 && (is_user_byte(b[s - 1]) || matches!(b[s - 1], b'+' | b'%')) {
            s -= 1;
        }
        if s == i {
            continue; // `@staticmethod`, `@ 0x7f...`
        }
        // `scheme://user:pass@host`: the URL's credentials, read by `urls`.
        let k = schemes.partition_point(|&(u, _)| u < i);
        if k.checked_sub(1).and_then(|k| schemes.get(k)).is_some_and(|&(_, end)| i < end) {
            continue;
        }
        let n = line[i + 1..].bytes().take_while(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.')).count();
        let domain = line[i + 1..i + 1 + n].trim_end_matches('.');
        if domain.is_empty() {
            continue;
        }
        let local = &line[s..i];
        if is_email_domain(domain) && !local.starts_with('.') {
            v.push(Hit { start: s, end: i + 1 + domain.len(), what: What::Email });
        } else if user_at_host(line, domain) {
            if !SYSTEM_USERS.contains(&local) {
                v.push(Hit { start: s, end: i, what: What::User });
            }
            if known.is_host(domain) {
                v.push(Hit { start: i + 1, end: i + 1 + domain.len(), what: What::Host });
            }
        }
    }
}

pub(super) fn is_ipv4(s: &str) -> bool {
    let mut n = 0;
    for p in s.split('.') {
        n += 1;
        if p.is_empty()
            || p.len() > 3
            || !p.bytes().all(|c| c.is_ascii_digit())
            || p.parse::<u16>().map_or(true, |x| x > 255)
        {
            return false;
        }
    }
    n == 4
}

/// The word before byte `s` names a version (`cuDNN version 8.9.2.26`, `NCCL 2.18.3.1`).
fn after_version_word(line: &str, s: usize) -> bool {
    let before = line[..s].trim_end_matches([' ', '=', ':', '(']);
    let word: String = before
        .bytes()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
        .map(|c| c.to_ascii_lowercase() as char)
        .collect::<String>()
        .chars()
        .rev()
        .collect();
    VERSION_WORDS.iter().any(|w| word == *w || word.ends_with("version"))
}

/// IPv4 and IPv6 addresses, learned hosts and private-looking FQDNs.
fn addresses_and_hosts(line: &str, known: &Known, v: &mut Vec<Hit>) {
    let b = line.as_bytes();
    for (s, e) in runs(line, |c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_')) {
        let w = line[s..e].trim_end_matches('.');
        let end = s + w.len();
        if w.is_empty() {
            continue;
        }
        if w.as_bytes()[0].is_ascii_digit() && is_ipv4(w) {
            let loopback = w.starts_with("127.") || w == "0.0.0.0";
            let versioned = after_version_word(line, s) || b.get(end) == Some(&b'+');
            if !loopback && !versioned {
                v.push(Hit { start: s, end, what: What::Ip(Class::Ipv4) });
            }
            continue;
        }
        if w.contains('_') {
            // Hosts have no `_`; a learned host inside `gpu-3_rank0` is its own part.
            for (ps, pe) in runs(w, |c| c != b'_') {
                if known.is_host(&w[ps..pe]) {
                    v.push(Hit { start: s + ps, end: s + pe, what: What::Host });
                }
            }
            continue;
        }
        if known.is_host(w) || private_fqdn(w) {
            v.push(Hit { start: s, end, what: What::Host });
        }
    }
    if memchr::memchr(b':', b).is_some() {
        ipv6(line, v);
    }
}

/// A dotted name that can only be a host: at least three labels with a known top-level
/// label and a digit or dash somewhere (`gpu-node-17.corp.example.com`), or any name
/// under a private top-level label (`trainer-3.cluster`).
fn private_fqdn(w: &str) -> bool {
    if !w.contains('.') {
        return false;
    }
    let lower = w.to_ascii_lowercase();
    let labels: Vec<&str> = lower.split('.').collect();
    let Some(tld) = labels.last() else { return false };
    if labels.iter().any(|l| l.is_empty()) || is_public(&lower) {
        return false;
    }
    if PRIVATE_TLDS.contains(tld) && labels.len() >= 2 && labels[0].bytes().any(|c| c.is_ascii_alphabetic()) {
        return true;
    }
    labels.len() >= 3
        && TLDS.contains(tld)
        && labels[..labels.len() - 1].iter().any(|l| l.bytes().any(|c| c.is_ascii_digit() || c == b'-'))
}

/// IPv6 addresses: a run of hex digits, colons and dots bounded by non-word bytes that
/// parses as one, with a real group (`fe80::1`, not `x[1::2]`) and not loopback.
fn ipv6(line: &str, v: &mut Vec<Hit>) {
    let b = line.as_bytes();
    for (s, e) in runs(line, |c| c.is_ascii_hexdigit() || c == b':' || c == b'.') {
        let mut s = s;
        // `eth0:fe80::1`: the address starts after the interface's colon.
        if s > 0 && is_word_byte(b[s - 1]) {
            match line[s..e].find(':') {
                Some(c) => s += c + 1,
                None => continue,
            }
        }
        let w = &line[s..e];
        if w.bytes().filter(|&c| c == b':').count() < 2 {
            continue;
        }
        if e < b.len() && is_word_byte(b[e]) && b[e] != b'%' {
            continue;
        }
        let w = w.trim_end_matches(['.', ':']);
        let real_group = w.split(':').any(|g| g.len() >= 3) || w.bytes().filter(|&c| c == b':').count() >= 4;
        if !real_group {
            continue;
        }
        if let Ok(a) = w.parse::<Ipv6Addr>() {
            if !a.is_loopback() && !a.is_unspecified() {
                let mut end = s + w.len();
                // A zone (`fe80::1%eth0`) goes with the address.
                if b.get(end) == Some(&b'%') {
                    end += 1 + line[end + 1..].bytes().take_while(|c| c.is_ascii_alphanumeric()).count();
                }
                v.push(Hit { start: s, end, what: What::Ip(Class::Ipv6) });
            }
        }
    }
}
