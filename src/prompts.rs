//! The probe prompt pool: arithmetic questions with random operands, and the
//! answer check that decides whether a reply passes.
//!
//! The pool is a TOML file (format documented at the top of
//! `prompts/arithmetic.toml`, which is embedded as the default). Operands are
//! drawn at random so that no provider can pass from a cache. Every template
//! is checked when the file is loaded, so a bad file fails the command at
//! start-up rather than producing unanswerable probes an hour later.
//!
//! [`Pool::solve`] reads a prompt back into its answer; the fake provider uses
//! it to answer correctly without sharing state with the prober.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use rand::{RngExt, SeedableRng};
use serde::Deserialize;

use crate::error::{Error, Result};

/// Appended to every question (docs/formats.md, "Probes").
pub const SUFFIX: &str = " Reply with only the number.";

const EMBEDDED: &str = include_str!("../prompts/arithmetic.toml");
const EMBEDDED_NAME: &str = "embedded prompts/arithmetic.toml";

/// How many seeded random draws each template must survive at load time, on
/// top of every corner of its ranges.
const VALIDATION_SAMPLES: usize = 200;

/// One question, ready to send, with the answer that passes.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The full prompt, ending with "Reply with only the number."
    pub text: String,
    pub expected: i64,
}

/// The loaded, validated pool.
#[derive(Debug, Clone)]
pub struct Pool {
    entries: Vec<Entry>,
}

#[derive(Debug, Clone)]
enum Entry {
    Template(Template),
    Fixed { question: String, answer: i64 },
}

#[derive(Debug, Clone)]
struct Template {
    question: Vec<Segment>,
    /// Random operands with inclusive bounds, in name order.
    vars: Vec<(String, i64, i64)>,
    /// Derived operands; they refer to `vars` only.
    lets: Vec<(String, Expr)>,
    answer: Expr,
}

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Lit(String),
    Slot(String),
}

type Env = BTreeMap<String, i64>;

// ---------------------------------------------------------------------------
// File format

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolFile {
    #[serde(default)]
    template: Vec<TemplateDef>,
    #[serde(default)]
    fixed: Vec<FixedDef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateDef {
    question: toml::Spanned<String>,
    answer: String,
    #[serde(default)]
    vars: BTreeMap<String, [i64; 2]>,
    #[serde(default, rename = "let")]
    lets: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FixedDef {
    question: toml::Spanned<String>,
    answer: i64,
}

impl Pool {
    /// The pool compiled into the binary.
    pub fn embedded() -> Pool {
        // Validation draws thousands of samples; do it once per process. The
        // embedded file is covered by a unit test, so this cannot fail in a
        // released binary.
        static POOL: std::sync::OnceLock<Pool> = std::sync::OnceLock::new();
        POOL.get_or_init(|| {
            Pool::parse(EMBEDDED, EMBEDDED_NAME).expect("embedded prompt pool is valid")
        })
        .clone()
    }

    /// Load a pool file that replaces the embedded one wholesale.
    pub fn load(path: &Path) -> Result<Pool> {
        let name = path.display().to_string();
        let text = crate::fsutil::read_text_file(path)
            .map_err(|e| Error::config(format!("cannot read prompts file {name}: {e}")))?;
        Pool::parse(&text, &name)
    }

    /// Parse and validate pool text; `name` labels error messages.
    pub fn parse(text: &str, name: &str) -> Result<Pool> {
        let file: PoolFile = toml::from_str(text)
            .map_err(|e| Error::config(format!("prompts file {name}: {}", one_line(&e))))?;
        let line_of = |span: std::ops::Range<usize>| {
            text.get(..span.start)
                .map(|t| t.matches('\n').count() + 1)
                .unwrap_or(0)
        };
        let mut entries = Vec::new();
        for def in file.template {
            let line = line_of(def.question.span());
            let question = def.question.into_inner();
            let t =
                Template::compile(&question, &def.answer, &def.vars, &def.lets).map_err(|m| {
                    Error::config(format!(
                        "prompts file {name}, line {line}: template {question:?}: {m}"
                    ))
                })?;
            entries.push((line, Entry::Template(t)));
        }
        for def in file.fixed {
            let line = line_of(def.question.span());
            let question = def.question.into_inner();
            if question.trim().is_empty() {
                return Err(Error::config(format!(
                    "prompts file {name}, line {line}: fixed question is empty"
                )));
            }
            entries.push((
                line,
                Entry::Fixed {
                    question,
                    answer: def.answer,
                },
            ));
        }
        if entries.is_empty() {
            return Err(Error::config(format!(
                "prompts file {name}: no [[template]] or [[fixed]] entries"
            )));
        }
        let lines: Vec<usize> = entries.iter().map(|(l, _)| *l).collect();
        let pool = Pool {
            entries: entries.into_iter().map(|(_, e)| e).collect(),
        };
        pool.check_readback(|i, m| {
            Error::config(format!("prompts file {name}, line {}: {m}", lines[i]))
        })?;
        Ok(pool)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A random question with random operands.
    pub fn draw(&self, rng: &mut impl rand::Rng) -> Question {
        let entry = &self.entries[rng.random_range(0..self.entries.len())];
        let (question, expected) = match entry {
            Entry::Fixed { question, answer } => (question.clone(), *answer),
            Entry::Template(t) => t.draw(rng),
        };
        Question {
            text: format!("{question}{SUFFIX}"),
            expected,
        }
    }

    /// The expected answer of a prompt drawn from this pool (for the fake
    /// provider), or `None` when no entry produced it.
    pub fn solve(&self, prompt: &str) -> Option<i64> {
        let prompt = prompt.trim();
        let question = prompt
            .strip_suffix(SUFFIX.trim_start())
            .map_or(prompt, str::trim_end);
        self.entries.iter().find_map(|e| match e {
            Entry::Fixed {
                question: q,
                answer,
            } => (q.trim() == question).then_some(*answer),
            Entry::Template(t) => t.solve(question),
        })
    }

    /// Every question this pool draws must read back to its own answer, or
    /// the fake provider would grade the prober wrongly. Two templates whose
    /// texts can collide fail here.
    fn check_readback(&self, err: impl Fn(usize, String) -> Error) -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x11e_960be);
        for (i, entry) in self.entries.iter().enumerate() {
            let samples = match entry {
                Entry::Fixed { .. } => 1,
                Entry::Template(_) => VALIDATION_SAMPLES,
            };
            for _ in 0..samples {
                let (question, expected) = match entry {
                    Entry::Fixed { question, answer } => (question.clone(), *answer),
                    Entry::Template(t) => t.draw(&mut rng),
                };
                let text = format!("{question}{SUFFIX}");
                let got = self.solve(&text);
                if got != Some(expected) {
                    let got = got.map_or("nothing".to_string(), |g| g.to_string());
                    return Err(err(
                        i,
                        format!(
                            "question {question:?} reads back as {got}, not {expected}; \
                             it is ambiguous with another entry"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Template {
    fn compile(
        question: &str,
        answer: &str,
        vars: &BTreeMap<String, [i64; 2]>,
        lets: &BTreeMap<String, String>,
    ) -> std::result::Result<Template, String> {
        let segments = parse_question(question)?;
        let shown: BTreeSet<&str> = segments
            .iter()
            .filter_map(|s| match s {
                Segment::Slot(n) => Some(n.as_str()),
                Segment::Lit(_) => None,
            })
            .collect();
        let mut var_list = Vec::new();
        for (n, [lo, hi]) in vars {
            check_name(n).map_err(|m| format!("vars: {m}"))?;
            if lo > hi {
                return Err(format!("var {n} has an empty range [{lo}, {hi}]"));
            }
            var_list.push((n.clone(), *lo, *hi));
        }
        let mut let_list = Vec::new();
        for (n, src) in lets {
            check_name(n).map_err(|m| format!("let: {m}"))?;
            if vars.contains_key(n) {
                return Err(format!("{n} is both a var and a let"));
            }
            let e = Expr::parse(src).map_err(|m| format!("let {n} = {src:?}: {m}"))?;
            for used in e.names() {
                if !vars.contains_key(used) {
                    return Err(format!("let {n} = {src:?} uses {used}, which is not a var"));
                }
            }
            let_list.push((n.clone(), e));
        }
        for n in &shown {
            if !vars.contains_key(*n) && !lets.contains_key(*n) {
                return Err(format!("placeholder {{{n}}} has no var or let"));
            }
        }
        for n in vars.keys() {
            let feeds_let = let_list.iter().any(|(_, e)| e.names().contains(n.as_str()));
            if !shown.contains(n.as_str()) && !feeds_let {
                return Err(format!("var {n} is not used"));
            }
        }
        for n in lets.keys() {
            if !shown.contains(n.as_str()) {
                return Err(format!("let {n} is not shown in the question"));
            }
        }
        let answer_expr = Expr::parse(answer).map_err(|m| format!("answer {answer:?}: {m}"))?;
        for used in answer_expr.names() {
            if !shown.contains(used) {
                return Err(format!(
                    "answer {answer:?} uses {used}, which the question does not show"
                ));
            }
        }
        let t = Template {
            question: segments,
            vars: var_list,
            lets: let_list,
            answer: answer_expr,
        };
        t.check_ranges(answer)?;
        Ok(t)
    }

    /// Evaluate at every corner of the ranges (where sums and products reach
    /// their extremes) and at seeded random points (where division may fail
    /// to be exact).
    fn check_ranges(&self, answer: &str) -> std::result::Result<(), String> {
        let n = self.vars.len().min(10);
        let mut points: Vec<Vec<i64>> = (0..1u32 << n)
            .map(|mask| {
                self.vars
                    .iter()
                    .enumerate()
                    .map(|(i, (_, lo, hi))| {
                        if i < n && mask & (1 << i) != 0 {
                            *hi
                        } else {
                            *lo
                        }
                    })
                    .collect()
            })
            .collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        points.extend((0..VALIDATION_SAMPLES).map(|_| self.sample(&mut rng)));
        for p in points {
            if let Err(m) = self.evaluate(&p) {
                let at: Vec<String> = self
                    .vars
                    .iter()
                    .zip(&p)
                    .map(|((n, _, _), v)| format!("{n}={v}"))
                    .collect();
                return Err(format!("answer {answer:?} fails at {}: {m}", at.join(", ")));
            }
        }
        Ok(())
    }

    fn sample(&self, rng: &mut impl rand::Rng) -> Vec<i64> {
        self.vars
            .iter()
            .map(|(_, lo, hi)| rng.random_range(*lo..=*hi))
            .collect()
    }

    /// The rendered question and its answer for these operand values.
    fn evaluate(&self, values: &[i64]) -> std::result::Result<(String, i64), String> {
        let mut env: Env = self
            .vars
            .iter()
            .zip(values)
            .map(|((n, _, _), v)| (n.clone(), *v))
            .collect();
        for (n, e) in &self.lets {
            let v = e.eval(&env).map_err(|m| format!("let {n}: {m}"))?;
            env.insert(n.clone(), v);
        }
        let answer = self.answer.eval(&env)?;
        let mut text = String::new();
        for s in &self.question {
            match s {
                Segment::Lit(l) => text.push_str(l),
                // Validation guarantees every slot is bound.
                Segment::Slot(n) => text.push_str(&env.get(n).copied().unwrap_or(0).to_string()),
            }
        }
        Ok((text, answer))
    }

    fn draw(&self, rng: &mut impl rand::Rng) -> (String, i64) {
        // Validation makes a failure here very unlikely; retrying keeps the
        // distribution honest, and the all-minimum corner is known to work.
        for _ in 0..64 {
            if let Ok(q) = self.evaluate(&self.sample(rng)) {
                return q;
            }
        }
        let lows: Vec<i64> = self.vars.iter().map(|(_, lo, _)| *lo).collect();
        self.evaluate(&lows).unwrap_or_default()
    }

    fn solve(&self, text: &str) -> Option<i64> {
        let mut env = Env::new();
        if match_segments(&self.question, text, &mut env) {
            self.answer.eval(&env).ok()
        } else {
            None
        }
    }
}

/// Match `text` against literal segments and integer slots, backtracking over
/// how many digits a slot takes. A repeated slot must repeat its value.
fn match_segments(segs: &[Segment], text: &str, env: &mut Env) -> bool {
    match segs.split_first() {
        None => text.is_empty(),
        Some((Segment::Lit(l), rest)) => text
            .strip_prefix(l.as_str())
            .is_some_and(|t| match_segments(rest, t, env)),
        Some((Segment::Slot(name), rest)) => {
            let bytes = text.as_bytes();
            let sign = usize::from(bytes.first() == Some(&b'-'));
            let digits = bytes[sign..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            for len in (1..=digits).rev() {
                let end = sign + len;
                // Rendered integers never have leading zeros.
                if len > 1 && bytes[sign] == b'0' {
                    continue;
                }
                let Ok(v) = text[..end].parse::<i64>() else {
                    continue;
                };
                match env.get(name) {
                    Some(&bound) => {
                        if bound == v && match_segments(rest, &text[end..], env) {
                            return true;
                        }
                    }
                    None => {
                        env.insert(name.clone(), v);
                        if match_segments(rest, &text[end..], env) {
                            return true;
                        }
                        env.remove(name);
                    }
                }
            }
            false
        }
    }
}

fn parse_question(q: &str) -> std::result::Result<Vec<Segment>, String> {
    if q.trim().is_empty() {
        return Err("question is empty".into());
    }
    let mut segs = Vec::new();
    let mut lit = String::new();
    let mut chars = q.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                lit.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                lit.push('}');
            }
            '{' => {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) => name.push(c),
                        None => return Err(format!("unclosed placeholder {{{name}")),
                    }
                }
                check_name(&name).map_err(|m| format!("placeholder {{{name}}}: {m}"))?;
                if lit.is_empty() && matches!(segs.last(), Some(Segment::Slot(_))) {
                    return Err(format!(
                        "placeholder {{{name}}} touches the one before it; separate them with text"
                    ));
                }
                if !lit.is_empty() {
                    segs.push(Segment::Lit(std::mem::take(&mut lit)));
                }
                segs.push(Segment::Slot(name));
            }
            '}' => return Err("unmatched }; write }} for a literal brace".into()),
            c => lit.push(c),
        }
    }
    if !lit.is_empty() {
        segs.push(Segment::Lit(lit));
    }
    Ok(segs)
}

fn check_name(n: &str) -> std::result::Result<(), String> {
    let mut cs = n.chars();
    let ok = cs
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!("{n:?} is not a valid name (letters, digits, _)"))
    }
}

fn one_line(e: &toml::de::Error) -> String {
    // toml's Display spans several lines with a source excerpt; keep it but
    // make it read as one message after "error: ".
    e.to_string().trim_end().replace('\n', "\n  ")
}

// ---------------------------------------------------------------------------
// Answer expressions: integer arithmetic with exact division.

#[derive(Debug, Clone)]
enum Expr {
    Num(i64),
    Var(String),
    Neg(Box<Expr>),
    Bin(Op, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Add => "+",
            Op::Sub => "-",
            Op::Mul => "*",
            Op::Div => "/",
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(i64),
    Name(String),
    Sym(char),
}

impl Expr {
    fn parse(src: &str) -> std::result::Result<Expr, String> {
        let toks = tokenize(src)?;
        let mut p = Parser { toks, pos: 0 };
        let e = p.expr()?;
        match p.toks.get(p.pos) {
            None => Ok(e),
            Some(t) => Err(format!("unexpected {} after the expression", tok_str(t))),
        }
    }

    fn names(&self) -> BTreeSet<&str> {
        let mut out = BTreeSet::new();
        self.collect_names(&mut out);
        out
    }

    fn collect_names<'a>(&'a self, out: &mut BTreeSet<&'a str>) {
        match self {
            Expr::Num(_) => {}
            Expr::Var(n) => {
                out.insert(n);
            }
            Expr::Neg(e) => e.collect_names(out),
            Expr::Bin(_, a, b) => {
                a.collect_names(out);
                b.collect_names(out);
            }
        }
    }

    fn eval(&self, env: &Env) -> std::result::Result<i64, String> {
        match self {
            Expr::Num(n) => Ok(*n),
            Expr::Var(n) => env.get(n).copied().ok_or_else(|| format!("{n} is unbound")),
            Expr::Neg(e) => e.eval(env)?.checked_neg().ok_or_else(overflow),
            Expr::Bin(op, a, b) => {
                let (x, y) = (a.eval(env)?, b.eval(env)?);
                match op {
                    Op::Add => x.checked_add(y).ok_or_else(overflow),
                    Op::Sub => x.checked_sub(y).ok_or_else(overflow),
                    Op::Mul => x.checked_mul(y).ok_or_else(overflow),
                    Op::Div => {
                        if y == 0 {
                            Err(format!("{x} / 0 divides by zero"))
                        } else if x.checked_rem(y) != Some(0) {
                            Err(format!("{x} {op} {y} does not divide exactly"))
                        } else {
                            x.checked_div(y).ok_or_else(overflow)
                        }
                    }
                }
            }
        }
    }
}

fn overflow() -> String {
    "integer overflow".into()
}

fn tok_str(t: &Tok) -> String {
    match t {
        Tok::Num(n) => n.to_string(),
        Tok::Name(n) => n.clone(),
        Tok::Sym(c) => format!("'{c}'"),
    }
}

fn tokenize(src: &str) -> std::result::Result<Vec<Tok>, String> {
    let mut toks = Vec::new();
    let cs: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < cs.len() && cs[i].is_ascii_digit() {
                i += 1;
            }
            let s: String = cs[start..i].iter().collect();
            toks.push(Tok::Num(
                s.parse().map_err(|_| format!("number {s} is too large"))?,
            ));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            toks.push(Tok::Name(cs[start..i].iter().collect()));
        } else if "+-*/()".contains(c) {
            toks.push(Tok::Sym(c));
            i += 1;
        } else {
            return Err(format!("unexpected character '{c}'"));
        }
    }
    if toks.is_empty() {
        return Err("empty expression".into());
    }
    Ok(toks)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn eat(&mut self, c: char) -> bool {
        if self.toks.get(self.pos) == Some(&Tok::Sym(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Sums and differences of terms.
    fn expr(&mut self) -> std::result::Result<Expr, String> {
        self.left_assoc(&[('+', Op::Add), ('-', Op::Sub)], Self::term)
    }

    /// Products and quotients of unary expressions.
    fn term(&mut self) -> std::result::Result<Expr, String> {
        self.left_assoc(&[('*', Op::Mul), ('/', Op::Div)], Self::unary)
    }

    /// One precedence level: operands read by `operand`, joined left to
    /// right by any of `ops`.
    fn left_assoc(
        &mut self,
        ops: &[(char, Op)],
        operand: fn(&mut Self) -> std::result::Result<Expr, String>,
    ) -> std::result::Result<Expr, String> {
        let mut e = operand(self)?;
        while let Some(&(_, op)) = ops.iter().find(|(c, _)| self.eat(*c)) {
            e = Expr::Bin(op, Box::new(e), Box::new(operand(self)?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> std::result::Result<Expr, String> {
        if self.eat('-') {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        match self.toks.get(self.pos).cloned() {
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(Expr::Num(n))
            }
            Some(Tok::Name(n)) => {
                self.pos += 1;
                Ok(Expr::Var(n))
            }
            Some(Tok::Sym('(')) => {
                self.pos += 1;
                let e = self.expr()?;
                if self.eat(')') {
                    Ok(e)
                } else {
                    Err("missing ')'".into())
                }
            }
            Some(t) => Err(format!("unexpected {}", tok_str(&t))),
            None => Err("expression ends too early".into()),
        }
    }
}

// ---------------------------------------------------------------------------
// Answer checking

/// Reasoning blocks some models emit before (or instead of) the answer.
const REASONING_TAGS: &[&str] = &["think", "thinking"];

/// Whether `reply` answers `expected` (docs/formats.md, "Probes"): after removing
/// reasoning blocks and markdown, the reply holds at least one number and
/// every number in it equals `expected`. A reply that hedges between two
/// numbers, or restates the operands, does not pass.
pub fn check_answer(reply: &str, expected: i64) -> bool {
    let numbers = answer_numbers(reply);
    !numbers.is_empty() && numbers.iter().all(|n| *n == Some(i128::from(expected)))
}

/// Whether `reply` counts from `from` to `to` (the speed probe): after the
/// same clean-up as [`check_answer`] (reasoning blocks and markdown
/// removed), the numbers in it are exactly `from`, `from + 1`, … `to`, in
/// order. What stands between and around them (spaces, commas, a line
/// break, a full stop, a word) is not checked, as in [`check_answer`]; a
/// number missing, repeated, out of order or added fails.
pub fn check_count(reply: &str, from: i64, to: i64) -> bool {
    let expected = (from..=to).map(|n| Some(i128::from(n)));
    from <= to && answer_numbers(reply).into_iter().eq(expected)
}

/// The numbers of a reply, once reasoning blocks and markdown are gone.
fn answer_numbers(reply: &str) -> Vec<Option<i128>> {
    let mut text = reply.to_string();
    for tag in REASONING_TAGS {
        text = strip_block(&text, tag);
    }
    let text: String = text
        .chars()
        .filter(|c| !matches!(c, '*' | '_' | '`' | '#' | '>'))
        .collect();
    extract_numbers(&text)
}

/// Remove `<tag>…</tag>` blocks, case-insensitively. An unclosed block means
/// the reply was cut off while reasoning, so everything after it goes. A
/// closing tag with no opening one (some models omit the opening tag) drops
/// everything before it.
fn strip_block(s: &str, tag: &str) -> String {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    // ASCII lowercasing keeps byte offsets, so indices found in `lower` are
    // valid in `s`.
    let lower = s.to_ascii_lowercase();
    let mut pos = 0;
    if let Some(c) = lower.find(&close)
        && lower.find(&open).is_none_or(|o| c < o)
    {
        pos = c + close.len();
    }
    let mut out = String::new();
    loop {
        match lower[pos..].find(&open) {
            None => {
                out.push_str(&s[pos..]);
                return out;
            }
            Some(o) => {
                let o = pos + o;
                out.push_str(&s[pos..o]);
                match lower[o + open.len()..].find(&close) {
                    None => return out,
                    Some(c) => pos = o + open.len() + c + close.len(),
                }
            }
        }
    }
}

/// Every number in `text`: `Some(value)` for an integer (allowing "1,234",
/// "14." and "14.0"), `None` for a number that is not an integer (or does not
/// fit), which can never equal the expected answer.
fn extract_numbers(text: &str) -> Vec<Option<i128>> {
    let cs: Vec<char> = text.chars().collect();
    let digit = |i: usize| cs.get(i).is_some_and(char::is_ascii_digit);
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        if !digit(i) {
            i += 1;
            continue;
        }
        // A minus directly before the number negates it, unless it sits
        // between two digits ("7-3" is a range or a sum, not -3).
        let negative = i > 0 && matches!(cs[i - 1], '-' | '\u{2212}') && !(i >= 2 && digit(i - 2));
        // ".5" is a fraction, not 5.
        let fraction_only = i > 0 && cs[i - 1] == '.' && !(i >= 2 && digit(i - 2));
        let start = i;
        while digit(i) {
            i += 1;
        }
        let mut int_digits: String = cs[start..i].iter().collect();
        // Thousands separators: a 1-3 digit head followed by ",ddd" groups.
        if int_digits.len() <= 3 {
            while cs.get(i) == Some(&',') && (1..=3).all(|k| digit(i + k)) && !digit(i + 4) {
                int_digits.extend(&cs[i + 1..i + 4]);
                i += 4;
            }
        }
        let mut integral = !fraction_only;
        if cs.get(i) == Some(&'.') && digit(i + 1) {
            i += 1;
            while digit(i) {
                if cs[i] != '0' {
                    integral = false;
                }
                i += 1;
            }
        }
        let value = int_digits
            .parse::<i128>()
            .ok()
            .filter(|_| integral)
            .map(|v| if negative { -v } else { v });
        out.push(value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn seeded(seed: u64) -> rand::rngs::StdRng {
        rand::rngs::StdRng::seed_from_u64(seed)
    }

    #[test]
    fn a_count_passes_only_when_every_number_is_there_in_order() {
        let seq: Vec<String> = (12..=15).map(|n| n.to_string()).collect();
        for ok in [
            seq.join(" "),
            format!("  {}.\n", seq.join(", ")),
            format!("<think>1 2 3</think>**{}**", seq.join(" ")),
        ] {
            assert!(check_count(&ok, 12, 15), "{ok:?}");
        }
        for wrong in [
            "12 13 15",
            "12 13 14 15 16",
            "12 14 13 15",
            "",
            "12 13 13 14 15",
        ] {
            assert!(!check_count(wrong, 12, 15), "{wrong:?}");
        }
    }

    #[test]
    fn embedded_pool_loads_and_is_varied() {
        let pool = Pool::embedded();
        let templates = pool
            .entries
            .iter()
            .filter(|e| matches!(e, Entry::Template(_)))
            .count();
        assert!(templates >= 10, "only {templates} templates");
        assert_eq!(pool.len(), pool.entries.len());
        assert!(!pool.is_empty());
    }

    #[test]
    fn every_entry_reads_back_to_its_answer() {
        let pool = Pool::embedded();
        let mut rng = seeded(1);
        for entry in &pool.entries {
            for _ in 0..300 {
                let (q, expected) = match entry {
                    Entry::Fixed { question, answer } => (question.clone(), *answer),
                    Entry::Template(t) => t.draw(&mut rng),
                };
                let text = format!("{q}{SUFFIX}");
                assert_eq!(pool.solve(&text), Some(expected), "{text}");
            }
        }
        for _ in 0..2000 {
            let q = pool.draw(&mut rng);
            assert_eq!(pool.solve(&q.text), Some(q.expected), "{}", q.text);
        }
    }

    #[test]
    fn drawn_questions_look_right() {
        let pool = Pool::embedded();
        let mut rng = seeded(2);
        let mut texts = BTreeSet::new();
        for _ in 0..2000 {
            let q = pool.draw(&mut rng);
            assert!(
                q.text.ends_with(" Reply with only the number."),
                "{}",
                q.text
            );
            assert!(!q.text.contains('{'), "{}", q.text);
            assert!(q.expected >= 10, "{} -> {}", q.text, q.expected);
            assert!(check_answer(&q.expected.to_string(), q.expected));
            texts.insert(q.text);
        }
        // Random operands: a cache keyed on the prompt cannot keep up.
        assert!(texts.len() > 1000, "only {} distinct prompts", texts.len());
    }

    #[test]
    fn draw_is_reproducible_with_a_seed() {
        let pool = Pool::embedded();
        let a: Vec<Question> = (0..20)
            .map({
                let mut r = seeded(7);
                move |_| pool.draw(&mut r)
            })
            .collect();
        let pool = Pool::embedded();
        let b: Vec<Question> = (0..20)
            .map({
                let mut r = seeded(7);
                move |_| pool.draw(&mut r)
            })
            .collect();
        assert_eq!(a, b);
        // And the thread rng works with the same signature.
        let q = Pool::embedded().draw(&mut rand::rng());
        assert!(q.text.ends_with(SUFFIX));
    }

    #[test]
    fn division_templates_divide_exactly() {
        let pool = Pool::parse(
            r#"
[[template]]
question = "What is {p} divided by {b}?"
answer = "p / b"
vars = { b = [3, 12], q = [11, 40] }
let = { p = "b * q" }
"#,
            "t.toml",
        )
        .unwrap();
        let mut rng = seeded(3);
        for _ in 0..500 {
            let q = pool.draw(&mut rng);
            let nums: Vec<i64> = q
                .text
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            assert_eq!(nums[0] / nums[1], q.expected);
            assert_eq!(nums[0] % nums[1], 0);
            assert!((11..=40).contains(&q.expected));
        }
    }

    #[test]
    fn solve_rejects_foreign_prompts() {
        let pool = Pool::embedded();
        assert_eq!(
            pool.solve("What is 2 ** 3? Reply with only the number."),
            None
        );
        assert_eq!(pool.solve("hello"), None);
        assert_eq!(pool.solve(""), None);
        // A repeated placeholder must repeat its value.
        let twice = Pool::parse(
            "[[template]]\nquestion = \"What is {a} plus {a}?\"\nanswer = \"a + a\"\nvars = { a = [10, 20] }\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(
            twice.solve("What is 12 plus 13? Reply with only the number."),
            None
        );
        assert_eq!(
            twice.solve("What is 12 plus 12? Reply with only the number."),
            Some(24)
        );
        // Operands outside the ranges still solve: the fake must answer
        // whatever a custom pool produced.
        assert_eq!(
            pool.solve("What is 1000 + 2000? Reply with only the number."),
            Some(3000)
        );
    }

    fn load_err(text: &str) -> String {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        let e = Pool::load(f.path()).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains(&f.path().display().to_string()),
            "message does not name the file: {msg}"
        );
        msg
    }

    #[test]
    fn load_replaces_the_pool() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(
            br#"
[[template]]
question = "What is {a} plus {a}?"
answer = "a + a"
vars = { a = [10, 20] }
[[fixed]]
question = "How many legs do three spiders have in total?"
answer = 24
"#,
        )
        .unwrap();
        let pool = Pool::load(f.path()).unwrap();
        assert_eq!(pool.len(), 2);
        let mut rng = seeded(4);
        for _ in 0..50 {
            let q = pool.draw(&mut rng);
            assert!(
                q.text.starts_with("What is ") || q.text.starts_with("How many legs"),
                "{}",
                q.text
            );
        }
        assert_eq!(
            pool.solve("What is 12 + 13? Reply with only the number."),
            None
        );
    }

    #[test]
    fn bad_files_are_config_errors_naming_the_file() {
        // Unreadable.
        let e = Pool::load(Path::new("/nonexistent/prompts.toml")).unwrap_err();
        assert!(matches!(e, Error::Config(_)));
        assert!(e.to_string().contains("/nonexistent/prompts.toml"), "{e}");

        let m = load_err("[[template]\nquestion = 1");
        assert!(m.contains("line 1"), "{m}");

        let m = load_err(
            "[[template]]\nquestion = \"What is {a}?\"\nanswer = \"a\"\nvars = { a = [10, 20] }\ncolour = 3\n",
        );
        assert!(m.contains("colour") && m.contains("line 5"), "{m}");

        let m = load_err(
            "\n\n[[template]]\nquestion = \"What is {a} + {b}?\"\nanswer = \"a + b\"\nvars = { a = [10, 20] }\n",
        );
        assert!(m.contains("{b}") && m.contains("line 4"), "{m}");

        let m = load_err(
            "[[template]]\nquestion = \"What is {a}?\"\nanswer = \"a +\"\nvars = { a = [10, 20] }\n",
        );
        assert!(m.contains("answer"), "{m}");

        let m = load_err(
            "[[template]]\nquestion = \"What is {a}?\"\nanswer = \"a\"\nvars = { a = [20, 10] }\n",
        );
        assert!(m.contains("empty range"), "{m}");

        let m = load_err("# nothing here\n");
        assert!(m.contains("no [[template]]"), "{m}");

        let m = load_err(
            "[[template]]\nquestion = \"What is {a} / {b}?\"\nanswer = \"a / b\"\nvars = { a = [10, 20], b = [3, 7] }\n",
        );
        assert!(m.contains("divide exactly"), "{m}");

        let m = load_err(
            "[[template]]\nquestion = \"What is {a} / {b}?\"\nanswer = \"a / b\"\nvars = { a = [10, 20], b = [0, 7] }\n",
        );
        assert!(m.contains("zero") || m.contains("divide"), "{m}");

        let m = load_err(
            "[[template]]\nquestion = \"What is {a}{b}?\"\nanswer = \"a + b\"\nvars = { a = [10, 20], b = [10, 20] }\n",
        );
        assert!(m.contains("touches"), "{m}");

        let m = load_err(
            "[[template]]\nquestion = \"What is {a} and {p}?\"\nanswer = \"a + c\"\nvars = { a = [10, 20], c = [1, 2] }\nlet = { p = \"c * 2\" }\n",
        );
        assert!(m.contains("does not show"), "{m}");

        let m = load_err(
            "[[template]]\nquestion = \"What is {a}?\"\nanswer = \"a\"\nvars = { a = [10, 20], z = [1, 2] }\n",
        );
        assert!(m.contains("var z is not used"), "{m}");

        let m = load_err(
            "[[template]]\nquestion = \"What is {a\"\nanswer = \"a\"\nvars = { a = [10, 20] }\n",
        );
        assert!(m.contains("unclosed"), "{m}");

        // Two entries that read back ambiguously.
        let m = load_err(
            "[[template]]\nquestion = \"What is {a}?\"\nanswer = \"a\"\nvars = { a = [10, 20] }\n[[template]]\nquestion = \"What is {b}?\"\nanswer = \"b + 1\"\nvars = { b = [10, 20] }\n",
        );
        assert!(m.contains("ambiguous") && m.contains("line 6"), "{m}");
    }

    #[test]
    fn expressions() {
        let env: Env = [("a".to_string(), 7), ("b".to_string(), 3)].into();
        let ev = |s: &str| Expr::parse(s).unwrap().eval(&env);
        assert_eq!(ev("a + b * 2"), Ok(13));
        assert_eq!(ev("(a + b) * 2"), Ok(20));
        assert_eq!(ev("a - b - 1"), Ok(3));
        assert_eq!(ev("-a + 10"), Ok(3));
        assert_eq!(ev("21 / a / b"), Ok(1));
        assert!(ev("a / b").is_err());
        assert!(ev("a / (b - 3)").is_err());
        assert!(ev("9223372036854775807 + 1").is_err());
        assert!(Expr::parse("a +").is_err());
        assert!(Expr::parse("(a").is_err());
        assert!(Expr::parse("a b").is_err());
        assert!(Expr::parse("a ^ 2").is_err());
        assert!(Expr::parse("").is_err());
    }

    #[test]
    fn answer_check_from_the_design() {
        assert!(check_answer("14", 14));
        assert!(check_answer("The answer is 14", 14));
        assert!(check_answer("**14**", 14));
        assert!(check_answer("14.", 14));
        assert!(!check_answer("140", 14));
        assert!(!check_answer("4", 14));
        assert!(!check_answer("4 (or 14)", 14));
        assert!(!check_answer("", 14));
        assert!(!check_answer("<think>7+7=14</think>", 14));
        assert!(!check_answer("<think>Let me compute 7+", 14));
        assert!(check_answer("<think>maybe 15</think>\n14", 14));
    }

    #[test]
    fn answer_check_more_cases() {
        assert!(check_answer("14.0", 14));
        assert!(check_answer("14.00\n", 14));
        assert!(!check_answer("14.5", 14));
        assert!(!check_answer(".14", 14));
        assert!(check_answer("1,234", 1234));
        assert!(check_answer("The total is 1,234.", 1234));
        assert!(!check_answer("14,000", 14));
        assert!(!check_answer("4,14", 14));
        assert!(check_answer("`14`", 14));
        assert!(check_answer("# 14", 14));
        assert!(check_answer("> 14", 14));
        assert!(check_answer("__14__", 14));
        assert!(check_answer("  14  \n", 14));
        assert!(check_answer("14 14", 14));
        assert!(!check_answer("-14", 14));
        assert!(check_answer("-14", -14));
        assert!(check_answer("\u{2212}14", -14));
        assert!(!check_answer("7 + 7 = 14", 14));
        assert!(!check_answer("14-15", 14));
        assert!(!check_answer("fourteen", 14));
        assert!(!check_answer("no idea", 14));
        assert!(!check_answer(
            "99999999999999999999999999999999999999999",
            14
        ));
        // Reasoning variants.
        assert!(check_answer("<THINK>so 13?</THINK> 14", 14));
        assert!(check_answer("<thinking>3 and 4</thinking>14", 14));
        assert!(check_answer("<think>a</think>14<think>b 99</think>", 14));
        assert!(check_answer("7 + 7 is 14, 3 times\n</think>\n\n14", 14));
        assert!(!check_answer("<think></think>", 14));
        assert!(!check_answer("14 <think>but maybe 15", 15));
        assert!(check_answer("14 <think>but maybe 15", 14));
    }
}
