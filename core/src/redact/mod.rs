//! Redaction: share a log without sharing its secrets.
//!
//! A [`Redactor`] replaces credentials (by their structure: AWS, GitHub, GitLab, Slack,
//! Stripe, OpenAI/Anthropic, Google, Hugging Face, npm and PyPI tokens, JWTs, PEM private
//! key blocks; and by the name they stand under: `password: ...`, `HF_TOKEN=...`,
//! `Authorization:`, `Cookie:`, `X-Api-Key:`, URL credentials, `curl -u user:pass`,
//! `--token X`), identities (user names where a user name stands: home paths, `USER=`,
//! `SLURM_JOB_USER=`, `ssh ivan@host`), host names (learned from the places that name a
//! host, and private-looking FQDNs), IPv4 and IPv6 addresses and e-mail addresses with
//! placeholders: `<secret3>`, `<user>`, `<host2>`, `<ip1>`, `<email1>`, `<private-key>`.
//!
//! What it promises, and how:
//! - **Every line is kept**, and every byte that is not a secret: lines are redacted one at
//!   a time and written back with their own terminators; bytes that are not UTF-8 pass
//!   through untouched.
//! - **Consistent**: the same value gets the same placeholder everywhere in the log
//!   (numbered by first appearance), so `<host2>` in rank 3's NCCL lines is the host of
//!   the `host :` field.
//! - **Streaming, bounded memory**: [`Redactor::feed`] takes chunks of any size; a line
//!   longer than [`SEGMENT`] is redacted in segments cut at a space. Host names are
//!   learned as they appear; a caller that can read its input twice first runs
//!   [`Redactor::learn`] over all of it, so a host named late is also replaced early.
//! - **Diagnosis unchanged**: versions (`cuDNN version 8.9.2.26`), decorators
//!   (`@staticmethod`), commit hashes, `max_token=2048`, `use_auth=True`, `sk-learn`,
//!   `pad_token="<pad>"` and code (`token = tokenizer(text)`) are not secrets; a test
//!   diagnoses every rule example redacted and compares.
//!
//! [`scrub_secrets`] removes only credentials and is applied to every report's message
//! evidence.

use std::collections::BTreeMap;

mod detect;

use detect::{Hit, What};

/// Longest segment of one line redacted at once: a longer line is cut at a space.
pub const SEGMENT: usize = 1 << 20;

/// A class of redacted value, for the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// A user name in a home path, `USER=`, `ssh user@host`, `curl -u user:...`.
    User,
    /// A host name.
    Host,
    /// An IPv4 address (loopback kept).
    Ipv4,
    /// An IPv6 address (loopback kept).
    Ipv6,
    /// An e-mail address.
    Email,
    /// An AWS access key id (`AKIA...`, `ASIA...`).
    AwsAccessKey,
    /// A GitHub token (`ghp_`, `gho_`, `ghs_`, `ghu_`, `ghr_`, `github_pat_`).
    GithubToken,
    /// A GitLab token (`glpat-`, `gldt-`, ...).
    GitlabToken,
    /// A Slack token (`xoxb-`, `xoxp-`, ...).
    SlackToken,
    /// A Stripe key (`sk_live_`, `rk_test_`, ...).
    StripeKey,
    /// An OpenAI or Anthropic key (`sk-...`, `sk-proj-...`, `sk-ant-...`).
    AiApiKey,
    /// A Google API key (`AIza...`).
    GoogleApiKey,
    /// A Hugging Face token (`hf_...`).
    HuggingfaceToken,
    /// An npm token (`npm_...`).
    NpmToken,
    /// A PyPI upload token (`pypi-AgEI...`).
    PypiToken,
    /// A JSON Web Token (`eyJ...`).
    Jwt,
    /// The body of a PEM private key block.
    PrivateKey,
    /// The password or token in a URL (`https://user:pass@host`, `https://TOKEN@host`).
    UrlCredential,
    /// The credential of an `Authorization:` header or a `Bearer`/`Basic` token.
    AuthHeader,
    /// The value of a `Cookie:` or `Set-Cookie:` header.
    Cookie,
    /// A value assigned to a password key (`password: ...`, `passwd=...`).
    Password,
    /// A value assigned to another secret key (`HF_TOKEN=`, `api_key:`, `secret_key:`,
    /// `aws_secret_access_key =`, `--token X`).
    SecretValue,
}

impl Class {
    /// The class's name in the summary.
    pub fn name(self) -> &'static str {
        match self {
            Class::User => "user name",
            Class::Host => "host name",
            Class::Ipv4 => "IPv4 address",
            Class::Ipv6 => "IPv6 address",
            Class::Email => "e-mail address",
            Class::AwsAccessKey => "AWS access key id",
            Class::GithubToken => "GitHub token",
            Class::GitlabToken => "GitLab token",
            Class::SlackToken => "Slack token",
            Class::StripeKey => "Stripe key",
            Class::AiApiKey => "OpenAI/Anthropic key",
            Class::GoogleApiKey => "Google API key",
            Class::HuggingfaceToken => "Hugging Face token",
            Class::NpmToken => "npm token",
            Class::PypiToken => "PyPI token",
            Class::Jwt => "JSON Web Token",
            Class::PrivateKey => "private key line",
            Class::UrlCredential => "URL credential",
            Class::AuthHeader => "authorization credential",
            Class::Cookie => "cookie",
            Class::Password => "password",
            Class::SecretValue => "secret value",
        }
    }
}

/// The result of [`redact`]: the text and what was replaced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Redacted {
    /// The log with secrets and identities replaced.
    pub text: String,
    /// Class → how many values were replaced.
    pub counts: BTreeMap<Class, u64>,
}

/// Redacts a whole text: learns its host names, then redacts it line by line.
pub fn redact(text: &str) -> Redacted {
    let mut r = Redactor::new();
    r.learn(text.as_bytes());
    r.finish_learning();
    let mut out = Vec::with_capacity(text.len());
    r.feed(text.as_bytes(), &mut out);
    r.finish(&mut out);
    // Only whole UTF-8 sequences are ever replaced, by ASCII placeholders.
    let text = String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Redacted { text, counts: r.counts().clone() }
}

/// Removes credentials only (tokens, keys, authorization headers, `password=`), leaving
/// names and addresses: applied to message evidence in every report.
pub fn scrub_secrets(text: &str) -> String {
    let hits = detect::secrets(text);
    if hits.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for h in hits {
        out.push_str(&text[last..h.start]);
        out.push_str(if matches!(h.what, What::PrivateKey) { "<private-key>" } else { "<secret>" });
        last = h.end;
    }
    out.push_str(&text[last..]);
    out
}

/// A streaming redactor: [`learn`](Redactor::learn) (optional, a first pass), then
/// [`feed`](Redactor::feed) chunks and [`finish`](Redactor::finish).
#[derive(Debug, Default)]
pub struct Redactor {
    known: detect::Known,
    /// Value → its number, per placeholder stem.
    numbers: BTreeMap<(&'static str, String), usize>,
    next: BTreeMap<&'static str, usize>,
    counts: BTreeMap<Class, u64>,
    /// Bytes of an unfinished line.
    pending: Vec<u8>,
    /// Inside a PEM private key block: its body lines are replaced whole.
    in_pem: bool,
    lines: u64,
    changed: u64,
}

impl Redactor {
    /// A redactor that knows no host yet.
    pub fn new() -> Redactor {
        Redactor::default()
    }

    /// First pass (optional): learns host names from `chunk` without redacting.
    pub fn learn(&mut self, chunk: &[u8]) {
        let mut pending = std::mem::take(&mut self.pending);
        split(&mut pending, chunk, false, |seg| self.learn_segment(seg));
        self.pending = pending;
    }

    /// Ends the first pass (learns from a last line without a newline).
    pub fn finish_learning(&mut self) {
        let mut pending = std::mem::take(&mut self.pending);
        split(&mut pending, &[], true, |seg| self.learn_segment(seg));
    }

    /// Redacts `chunk`, appending the complete lines to `out` (an unfinished last line
    /// waits for the next chunk or [`finish`](Redactor::finish)).
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let mut pending = std::mem::take(&mut self.pending);
        split(&mut pending, chunk, false, |seg| self.redact_segment(seg, out));
        self.pending = pending;
    }

    /// Redacts what is left (a last line without a newline).
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        let mut pending = std::mem::take(&mut self.pending);
        split(&mut pending, &[], true, |seg| self.redact_segment(seg, out));
    }

    /// What was replaced so far, by class.
    pub fn counts(&self) -> &BTreeMap<Class, u64> {
        &self.counts
    }

    /// One line for a person: `redacted 7 values in 5 of 120 lines: 2 host names, ...`.
    pub fn summary(&self) -> String {
        if self.counts.is_empty() {
            return format!("nothing to redact in {} line{}", self.lines, if self.lines == 1 { "" } else { "s" });
        }
        let total: u64 = self.counts.values().sum();
        let classes: Vec<String> = self.counts.iter().map(|(c, n)| format!("{n} {}", plural(c.name(), *n))).collect();
        format!(
            "redacted {total} value{} in {} of {} line{}: {}",
            if total == 1 { "" } else { "s" },
            self.changed,
            self.lines,
            if self.lines == 1 { "" } else { "s" },
            classes.join(", ")
        )
    }

    fn learn_segment(&mut self, seg: &[u8]) {
        let (content, _) = strip_terminator(seg);
        for chunk in content.utf8_chunks() {
            self.known.learn(chunk.valid());
        }
    }

    fn redact_segment(&mut self, seg: &[u8], out: &mut Vec<u8>) {
        let (content, terminator) = strip_terminator(seg);
        self.lines += u64::from(!terminator.is_empty() || !content.is_empty());
        let before = self.counts.values().sum::<u64>();
        for chunk in content.utf8_chunks() {
            let text = chunk.valid();
            if !text.is_empty() {
                self.redact_text(text, out);
            }
            out.extend_from_slice(chunk.invalid());
        }
        out.extend_from_slice(terminator);
        if self.counts.values().sum::<u64>() > before {
            self.changed += 1;
        }
    }

    fn redact_text(&mut self, text: &str, out: &mut Vec<u8>) {
        // A PEM block's body: base64 lines between BEGIN and END markers, replaced whole.
        if self.in_pem {
            let t = text.trim();
            if t.starts_with("-----END ") {
                self.in_pem = false;
            } else if !t.is_empty() && detect::pem_body(t) {
                let indent = &text[..text.len() - text.trim_start().len()];
                out.extend_from_slice(indent.as_bytes());
                out.extend_from_slice(b"<private-key>");
                self.count(Class::PrivateKey);
                return;
            } else if !t.is_empty() && !t.contains(':') {
                // Not base64 and not a PEM header (`Proc-Type: 4,ENCRYPTED`): the block
                // ended without its END line.
                self.in_pem = false;
            }
        }
        self.known.learn(text);
        let hits = detect::hits(text, &self.known);
        if detect::opens_pem(text) && !detect::closes_pem(text) {
            self.in_pem = true;
        }
        let mut last = 0;
        for h in hits {
            out.extend_from_slice(&text.as_bytes()[last..h.start]);
            let value = &text[h.start..h.end];
            let placeholder = self.placeholder(h.what, value);
            out.extend_from_slice(placeholder.as_bytes());
            last = h.end;
        }
        out.extend_from_slice(&text.as_bytes()[last..]);
    }

    fn placeholder(&mut self, what: What, value: &str) -> String {
        let (class, stem) = match what {
            What::User => (Class::User, None),
            What::Host => (Class::Host, Some("host")),
            What::Ip(c) => (c, Some("ip")),
            What::Email => (Class::Email, Some("email")),
            What::PrivateKey => (Class::PrivateKey, None),
            What::Secret(c) => (c, Some("secret")),
        };
        self.count(class);
        let Some(stem) = stem else {
            return if class == Class::User { "<user>".into() } else { "<private-key>".into() };
        };
        // A host's FQDN and its first label are one host (`gpu-3.corp` and `gpu-3`).
        let lower = value.to_ascii_lowercase();
        let canonical = match lower.split_once('.') {
            Some((first, _))
                if stem == "host" && first.len() >= 3 && first.bytes().any(|c| c.is_ascii_digit() || c == b'-') =>
            {
                first.to_string()
            }
            _ => lower,
        };
        let key = (stem, canonical);
        let n = match self.numbers.get(&key) {
            Some(&n) => n,
            None => {
                let n = self.next.entry(stem).or_insert(0);
                *n += 1;
                let n = *n;
                self.numbers.insert(key, n);
                n
            }
        };
        format!("<{stem}{n}>")
    }

    fn count(&mut self, class: Class) {
        *self.counts.entry(class).or_default() += 1;
    }
}

fn plural(name: &str, n: u64) -> String {
    if n == 1 {
        name.to_string()
    } else if let Some(stem) = name.strip_suffix("address") {
        format!("{stem}addresses")
    } else {
        format!("{name}s")
    }
}

/// `seg` without its line terminator (`\n` or `\r\n`), and the terminator.
fn strip_terminator(seg: &[u8]) -> (&[u8], &[u8]) {
    let n = if seg.ends_with(b"\r\n") { 2 } else { usize::from(seg.ends_with(b"\n")) };
    seg.split_at(seg.len() - n)
}

/// Calls `each` with every complete line of `pending` + `chunk` (with its terminator),
/// and with segments of at most [`SEGMENT`] bytes of a longer line (cut after a space
/// where one is near, never inside a UTF-8 sequence); keeps the rest in `pending`, or
/// passes it too when `last`.
fn split(pending: &mut Vec<u8>, chunk: &[u8], last: bool, mut each: impl FnMut(&[u8])) {
    let mut rest = chunk;
    loop {
        if let Some(nl) = memchr::memchr(b'\n', rest) {
            if pending.is_empty() && nl < SEGMENT {
                each(&rest[..=nl]);
                rest = &rest[nl + 1..];
                continue;
            }
            let take = (nl + 1).min(SEGMENT.saturating_sub(pending.len()).max(1));
            pending.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if pending.ends_with(b"\n") {
                each(pending);
                pending.clear();
                continue;
            }
        } else {
            let take = rest.len().min(SEGMENT.saturating_sub(pending.len()).max(1));
            pending.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
        }
        if pending.len() >= SEGMENT {
            let cut = segment_cut(pending);
            each(&pending[..cut]);
            pending.drain(..cut);
            continue;
        }
        if rest.is_empty() {
            break;
        }
    }
    if last && !pending.is_empty() {
        each(pending);
        pending.clear();
    }
}

/// Where to cut an over-long line: after the last space in its second half, else at a
/// UTF-8 boundary.
fn segment_cut(b: &[u8]) -> usize {
    let half = b.len() / 2;
    if let Some(sp) = memchr::memrchr2(b' ', b'\t', &b[half..]) {
        return half + sp + 1;
    }
    let mut cut = b.len();
    while cut > half && (b[cut - 1] & 0xC0) == 0x80 {
        cut -= 1;
    }
    // `cut - 1` is now an ASCII byte or a sequence's first byte: keep the sequence whole.
    if cut > half && b[cut - 1] >= 0xC0 {
        cut -= 1;
    }
    cut
}

impl Hit {
    #[cfg(test)]
    fn text<'a>(&self, line: &'a str) -> &'a str {
        &line[self.start..self.end]
    }
}

#[cfg(test)]
mod tests;
