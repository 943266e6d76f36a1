//! Typed atoms shared by every grammar: devices, tensor type names, dtypes, shapes,
//! byte sizes, integers, identifiers and paths.
//!
//! Each atom is a nom parser over `&str` in *complete* mode (the input is always whole),
//! returning the remaining input and a value already normalised the way the report
//! contract spells it (`GPU` → `cuda`, `torch.cuda.HalfTensor` → `cuda` + `Half`).

use nom::branch::alt;
use nom::bytes::complete::{tag, take_while, take_while1};
use nom::character::complete::{char, digit1, multispace0, space0};
use nom::combinator::{opt, recognize};
use nom::multi::separated_list0;
use nom::sequence::{delimited, preceded};
use nom::{IResult, Parser};

/// A device as PyTorch spells it today: `cpu`, `cuda`, `cuda:1`, `mps:0`, `meta`.
pub fn device(i: &str) -> IResult<&str, String> {
    let (rest, kind) = alt((
        tag("cuda"),
        tag("cpu"),
        tag("mps"),
        tag("meta"),
        tag("xla"),
        tag("xpu"),
        tag("hpu"),
        tag("npu"),
        tag("privateuseone"),
        tag("CUDA"),
        tag("CPU"),
        tag("GPU"),
        tag("MPS"),
        tag("XLA"),
    ))
    .parse(i)?;
    let (rest, index) = opt(preceded(char(':'), digit1)).parse(rest)?;
    // A device name glued to more identifier characters is some other word (`cpuinfo`).
    if rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
        return Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Tag)));
    }
    let kind = match kind {
        "CUDA" | "GPU" => "cuda",
        "CPU" => "cpu",
        "MPS" => "mps",
        "XLA" => "xla",
        k => k,
    };
    Ok((
        rest,
        match index {
            Some(n) => format!("{kind}:{n}"),
            None => kind.to_string(),
        },
    ))
}

/// A legacy tensor type name, giving its device and dtype:
/// `torch.cuda.FloatTensor` → (`cuda`, `Float`), `torch.FloatTensor` → (`cpu`, `Float`),
/// `CUDAFloatType` → (`cuda`, `Float`), `MPSFloatType` → (`mps`, `Float`).
pub fn tensortype(i: &str) -> IResult<&str, (String, String)> {
    let legacy: IResult<&str, _> = (
        tag("torch."),
        opt(tag("cuda.")),
        opt(tag("sparse.")),
        take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_'),
    )
        .parse(i);
    if let Ok((rest, (_, cuda, _sparse, name))) = legacy {
        if let Some(dtype) = name.strip_suffix("Tensor").filter(|d| !d.is_empty()) {
            let dev = if cuda.is_some() { "cuda" } else { "cpu" };
            return Ok((rest, (dev.to_string(), dtype.to_string())));
        }
    }
    let (rest, name) = take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_').parse(i)?;
    let Some(body) = name.strip_suffix("Type") else {
        return Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Tag)));
    };
    for (prefix, dev) in [
        ("SparseCUDA", "cuda"),
        ("CUDA", "cuda"),
        ("SparseCPU", "cpu"),
        ("CPU", "cpu"),
        ("MPS", "mps"),
        ("XLA", "xla"),
        ("XPU", "xpu"),
        ("Meta", "meta"),
    ] {
        if let Some(dtype) = body.strip_prefix(prefix).filter(|d| !d.is_empty()) {
            return Ok((rest, (dev.to_string(), dtype.to_string())));
        }
    }
    Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Tag)))
}

/// A dtype as printed: ScalarType (`Float`, `BFloat16`), Python (`torch.float32`),
/// or C++ TypeMeta (`float`, `c10::Half`, `long int`).
pub fn dtype(i: &str) -> IResult<&str, String> {
    // MSVC builds print C++ type names with their keyword: `struct c10::Half`.
    let i = i.strip_prefix("struct ").or_else(|| i.strip_prefix("class ")).unwrap_or(i);
    let (rest, s) = alt((
        recognize((tag("torch."), ident)),
        recognize((tag("c10::"), ident)),
        recognize((
            alt((tag("long"), tag("unsigned"), tag("signed"))),
            space0,
            alt((tag("long int"), tag("int"), tag("char"), tag("long"))),
        )),
        ident,
    ))
    .parse(i)?;
    // A tensor type name (`torch.cuda.FloatTensor`, `CUDAFloatType`) names a device too:
    // it is no dtype.
    if s.ends_with("Tensor") || s.ends_with("Type") || rest.starts_with('.') {
        return Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Verify)));
    }
    Ok((rest, s.trim_end().to_string()))
}

/// One dimension of a shape: a size, or a symbol (`s0` of a dynamic shape under
/// `torch.compile`, `B` in a user's own message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A size.
    N(i64),
    /// A symbolic size.
    Sym(String),
}

impl From<i64> for Dim {
    fn from(n: i64) -> Dim {
        Dim::N(n)
    }
}

/// A shape as evidence: sizes as numbers, symbols as strings.
pub fn dims_value(d: &[Dim]) -> serde_json::Value {
    serde_json::Value::Array(
        d.iter()
            .map(|x| match x {
                Dim::N(n) => serde_json::Value::from(*n),
                Dim::Sym(s) => serde_json::Value::from(s.clone()),
            })
            .collect(),
    )
}

/// A shape: `64x128`, `[64, 128]`, `torch.Size([64, 128])`, `[]`, `[64 x 128]`, and with
/// symbolic sizes `[s0, 512]`, `[B, 512, 7, 7]`.
pub fn shape(i: &str) -> IResult<&str, Vec<Dim>> {
    if let Some(plain) = plain_shape(i) {
        return Ok(plain);
    }
    // A bracket the grammar cannot close: only its `[...]` form begins with one, and
    // that form holds nothing but dimensions, separators and blanks before its `]`.
    // Near misses cut a shape short (`[4, 3, 224 While ...`): no combinators for them.
    if let Some(body) = i.strip_prefix('[') {
        let inside = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | ',' | ' ' | '\t' | '\r' | '\n');
        if body.chars().find(|&c| !inside(c)) != Some(']') {
            return Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Char)));
        }
    }
    shape_grammar(i)
}

/// The shape grammar, every form.
fn shape_grammar(i: &str) -> IResult<&str, Vec<Dim>> {
    alt((delimited(tag("torch.Size(["), dims_list, (tag("])"),)), delimited(char('['), dims_list, char(']')), dims_x))
        .parse(i)
}

/// The form most shapes are printed in, `[64, 3, 224, 224]` (integers, each comma
/// followed by spaces or nothing), read byte by byte; `None` for anything else, which
/// the grammar then reads. The same result as the grammar where it answers, at a
/// fifth of the cost: a template with two shapes tried along a line of near misses
/// spent a seventh of its time in the combinators.
fn plain_shape(i: &str) -> Option<(&str, Vec<Dim>)> {
    let b = i.as_bytes();
    if b.first() != Some(&b'[') {
        return None;
    }
    let mut dims = Vec::new();
    if b.get(1) == Some(&b']') {
        return Some((&i[2..], dims));
    }
    let mut k = 1;
    loop {
        let start = k;
        if b.get(k) == Some(&b'-') {
            k += 1;
        }
        let digits = k;
        while b.get(k).is_some_and(u8::is_ascii_digit) {
            k += 1;
        }
        if k == digits {
            return None;
        }
        dims.push(Dim::N(int_value(&i[start..k])));
        match b.get(k) {
            Some(b']') => return Some((&i[k + 1..], dims)),
            Some(b',') => {
                k += 1;
                while b.get(k) == Some(&b' ') {
                    k += 1;
                }
            }
            _ => return None,
        }
    }
}

/// A size, or a short symbol of a dynamic shape (`s4`, `B`).
pub fn dim(i: &str) -> IResult<&str, Dim> {
    if let Ok((rest, n)) = int(i) {
        return Ok((rest, Dim::N(n)));
    }
    let (rest, s) = ident(i)?;
    if s.len() > 12 || s == "x" {
        return Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Verify)));
    }
    Ok((rest, Dim::Sym(s.to_string())))
}

fn dims_list(i: &str) -> IResult<&str, Vec<Dim>> {
    let sep = alt((recognize((multispace0, char(','), multispace0)), recognize((multispace0, char('x'), multispace0))));
    let (rest, dims) =
        delimited(multispace0, separated_list0(sep, dim), (multispace0, opt(char(',')), multispace0)).parse(i)?;
    Ok((rest, dims))
}

fn dims_x(i: &str) -> IResult<&str, Vec<Dim>> {
    let (rest, first) = int(i)?;
    let (rest, more) = nom::multi::many1(preceded(char('x'), int)).parse(rest)?;
    let mut dims = vec![Dim::N(first)];
    dims.extend(more.into_iter().map(Dim::N));
    Ok((rest, dims))
}

/// A byte size as the CUDA caching allocator prints it: `0 bytes`, `512.00 KiB`,
/// `20.00 MiB`, `79.15 GiB`. Returns the text as printed and the byte count.
pub fn size(i: &str) -> IResult<&str, (String, u64)> {
    let (rest, (num, _, unit)) = (
        recognize((digit1, opt((char('.'), digit1)))),
        space0,
        alt((
            tag("bytes"),
            tag("KiB"),
            tag("MiB"),
            tag("GiB"),
            tag("TiB"),
            tag("EiB"),
            tag("KB"),
            tag("MB"),
            tag("GB"),
            tag("EB"),
            tag("B"),
        )),
    )
        .parse(i)?;
    let value: f64 = num.parse().unwrap_or(0.0);
    let mult: f64 = match unit {
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024f64.powi(4),
        "EiB" => 1024f64.powi(6),
        "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "EB" => 1e18,
        _ => 1.0,
    };
    let printed = &i[..i.len() - rest.len()];
    Ok((rest, (printed.to_string(), (value * mult).round().min(u64::MAX as f64) as u64)))
}

/// A signed decimal integer (saturating: a 40-digit number does not fail or wrap).
pub fn int(i: &str) -> IResult<&str, i64> {
    let (rest, s) = recognize((opt(char('-')), digit1)).parse(i)?;
    Ok((rest, int_value(s)))
}

/// An integer's digits (with its sign) as a value, saturating where it overflows.
fn int_value(s: &str) -> i64 {
    s.parse::<i64>().unwrap_or(if s.starts_with('-') { i64::MIN } else { i64::MAX })
}

/// A decimal number as printed (`1.5`, `42`, `-0.25`, `1e-3`).
pub fn num(i: &str) -> IResult<&str, &str> {
    recognize((
        opt(char('-')),
        digit1,
        opt((char('.'), digit1)),
        opt((alt((char('e'), char('E'))), opt(alt((char('-'), char('+')))), digit1)),
    ))
    .parse(i)
}

/// A Python or C++ identifier.
pub fn ident(i: &str) -> IResult<&str, &str> {
    recognize((
        take_while1(|c: char| c.is_alphabetic() || c == '_'),
        take_while(|c: char| c.is_alphanumeric() || c == '_'),
    ))
    .parse(i)
}

/// A qualified name: `torch.nn.Linear`, `c10::Error`, `numpy.core.multiarray._reconstruct`.
pub fn qualname(i: &str) -> IResult<&str, &str> {
    recognize((ident, nom::multi::many0((alt((tag("::"), tag("."))), ident)))).parse(i)
}

/// A file path without spaces (`../aten/src/ATen/native/cuda/Loss.cu`, `C:\x\y.py`).
pub fn path(i: &str) -> IResult<&str, &str> {
    // A path ends at whitespace, quotes, brackets or `<`, except where a redaction
    // placeholder stands in it (`/home/<user>/...`): a redacted log reads the same.
    let mut end = 0;
    let bytes = i.as_bytes();
    while end < i.len() {
        let c = i[end..].chars().next().unwrap_or(' ');
        if c == '<' {
            if let Some(len) = placeholder_len(&bytes[end..]) {
                end += len;
                continue;
            }
            break;
        }
        if c.is_whitespace() || matches!(c, ',' | '"' | '\'' | '`' | ')' | '(' | '>') {
            break;
        }
        end += c.len_utf8();
    }
    // A trailing `:` or `.` belongs to the sentence, not the path.
    let trimmed = i[..end].trim_end_matches([':', '.']);
    if trimmed.is_empty() {
        return Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::TakeWhile1)));
    }
    Ok((&i[trimmed.len()..], trimmed))
}

/// The length of a redaction placeholder (`<user>`, `<host3>`, `<ip1>`, `<email2>`,
/// `<secret>`) at the start of `b`.
fn placeholder_len(b: &[u8]) -> Option<usize> {
    let close = b.iter().take(12).position(|&c| c == b'>')?;
    let name = std::str::from_utf8(&b[1..close]).ok()?;
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
    matches!(stem, "user" | "host" | "ip" | "email" | "secret").then_some(close + 1)
}

/// Any run of non-whitespace characters.
pub fn word(i: &str) -> IResult<&str, &str> {
    take_while1(|c: char| !c.is_whitespace()).parse(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices() {
        let table = [
            ("cpu and", "cpu", " and"),
            ("cuda:1!", "cuda:1", "!"),
            ("cuda", "cuda", ""),
            ("mps:0)", "mps:0", ")"),
            ("meta ", "meta", " "),
            ("xla:0", "xla:0", ""),
            ("GPU (while", "cuda", " (while"),
            ("CPU,", "cpu", ","),
        ];
        for (input, want, rest) in table {
            assert_eq!(device(input).unwrap(), (rest, want.to_string()), "{input}");
        }
        assert!(device("cpuinfo").is_err());
        assert!(device("gpu").is_err());
    }

    #[test]
    fn tensortypes() {
        let table = [
            ("torch.cuda.FloatTensor)", ("cuda", "Float"), ")"),
            ("torch.FloatTensor", ("cpu", "Float"), ""),
            ("torch.cuda.HalfTensor", ("cuda", "Half"), ""),
            ("torch.cuda.sparse.FloatTensor", ("cuda", "Float"), ""),
            ("CUDAFloatType)", ("cuda", "Float"), ")"),
            ("MPSFloatType", ("mps", "Float"), ""),
            ("CPUBFloat16Type", ("cpu", "BFloat16"), ""),
        ];
        for (input, (dev, dt), rest) in table {
            assert_eq!(tensortype(input).unwrap(), (rest, (dev.to_string(), dt.to_string())), "{input}");
        }
        assert!(tensortype("torch.Tensor").is_err());
        assert!(tensortype("Type").is_err());
    }

    /// Where the byte-by-byte reading of `[64, 3]` answers, it reads what the grammar
    /// reads (the same dimensions, the same rest), over texts built from the pieces
    /// shapes and their near misses are made of.
    #[test]
    fn a_plain_shape_reads_as_the_grammar_does() {
        let bits =
            ["[", "]", "4", "224", "-", "-3", ",", ", ", " ,", "  ", "x", "s0", "99999999999999999999", ")", "\n", "é"];
        let mut seed: u64 = 5;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        let mut answered = 0;
        for _ in 0..20_000 {
            let mut text = String::from("[");
            for _ in 0..next(9) {
                text.push_str(bits[next(bits.len())]);
            }
            if let Some((rest, dims)) = plain_shape(&text) {
                answered += 1;
                assert_eq!(shape_grammar(&text).ok(), Some((rest, dims)), "{text:?}");
            }
            assert_eq!(shape(&text).ok(), shape_grammar(&text).ok(), "{text:?}");
        }
        assert!(answered > 1000, "the plain reading answered only {answered} times");
    }

    #[test]
    fn shapes() {
        let table: [(&str, &[i64]); 6] = [
            ("64x128", &[64, 128]),
            ("[64, 128]", &[64, 128]),
            ("torch.Size([64, 128])", &[64, 128]),
            ("[]", &[]),
            ("[14]", &[14]),
            ("[4 x 3]", &[4, 3]),
        ];
        for (input, want) in table {
            assert_eq!(shape(input).unwrap().1, want.iter().map(|&n| Dim::N(n)).collect::<Vec<_>>(), "{input}");
        }
        let sym = |s: &str| Dim::Sym(s.to_string());
        assert_eq!(shape("[s0, 512]").unwrap().1, vec![sym("s0"), Dim::N(512)]);
        assert_eq!(shape("[B, 512, 7, 7]").unwrap().1, vec![sym("B"), Dim::N(512), Dim::N(7), Dim::N(7)]);
        assert_eq!(dims_value(&shape("[s0, 2]").unwrap().1), serde_json::json!(["s0", 2]));
        assert!(shape("[a very long sentence]").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(size("20.00 MiB").unwrap().1, ("20.00 MiB".to_string(), 20 * 1024 * 1024));
        assert_eq!(size("0 bytes").unwrap().1 .1, 0);
        assert_eq!(size("1.25 GiB.").unwrap(), (".", ("1.25 GiB".to_string(), 1_342_177_280)));
    }

    #[test]
    fn numbers_and_names() {
        assert_eq!(int("-9 (pid").unwrap(), (" (pid", -9));
        assert_eq!(int("99999999999999999999999").unwrap().1, i64::MAX);
        assert_eq!(qualname("torch.nn.Linear(").unwrap(), ("(", "torch.nn.Linear"));
        assert_eq!(qualname("c10::Error'").unwrap(), ("'", "c10::Error"));
        assert_eq!(dtype("long int instead").unwrap().1, "long int");
        assert_eq!(dtype("c10::Half").unwrap().1, "c10::Half");
        assert_eq!(dtype("torch.float32,").unwrap().1, "torch.float32");
        assert_eq!(dtype("struct c10::Half)").unwrap().1, "c10::Half");
        assert!(dtype("torch.cuda.FloatTensor").is_err());
        assert_eq!(path("../aten/src/Loss.cu:250:").unwrap().1, "../aten/src/Loss.cu:250");
        assert_eq!(path("/home/<user>/env/_C.so)").unwrap().1, "/home/<user>/env/_C.so");
        assert_eq!(path("10.1.2.3<34567>").unwrap().1, "10.1.2.3");
    }
}
