//! The fake provider's answer to a question that is not one of the probe
//! pool's: any arithmetic question, in symbols (`What is 2+2?`, `(3 + 4) *
//! 5`, `2^10`, `7 × 6`) or in plain words (`what is seven times six`,
//! `twelve divided by four`, `3 squared`), so that someone trying `route`
//! against the demo's fakes gets a right answer to what they typed. Anything
//! else gets a short reply that says what the fake can do.
//!
//! A small recursive-descent evaluator over exact integers and fractions
//! (no floating point: `1/3 * 3` is 1); an answer that is not a whole number
//! is given as a decimal.

/// The answer to `text`, if it is an arithmetic question or has one as a
/// sentence of its own ("What is 6 * 7? Answer in JSON.").
pub fn answer(text: &str) -> Option<String> {
    evaluate(question(text)?)
}

/// The part of `text` that is the arithmetic question: all of it, or else
/// its first sentence that is one (sentences end at `?`, `!`, a new line, or
/// a full stop before a space, so that `1.5` stays whole).
fn question(text: &str) -> Option<&str> {
    if evaluate(text).is_some() {
        return Some(text);
    }
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let end = matches!(b, b'?' | b'!' | b'\n')
            || (b == b'.' && bytes.get(i + 1).is_none_or(u8::is_ascii_whitespace));
        if end {
            let piece = &text[start..=i];
            if evaluate(piece).is_some() {
                return Some(piece);
            }
            start = i + 1;
        }
    }
    let rest = &text[start..];
    evaluate(rest).is_some().then_some(rest)
}

fn evaluate(text: &str) -> Option<String> {
    let tokens = tokenize(text)?;
    if !tokens.iter().any(|t| matches!(t, Tok::Op(_))) {
        return None;
    }
    let mut p = Parser { tokens, at: 0 };
    let value = p.expr()?;
    if p.at != p.tokens.len() {
        return None;
    }
    Some(value.show())
}

/// The bounds of a counting task, "Count from A to B" (the speed probe's
/// question, `capabilities::probe`), case-blind, wherever it stands in
/// `text`: `None` for any other text, and for A above B.
pub fn count(text: &str) -> Option<(i64, i64)> {
    let lower = text.to_ascii_lowercase();
    let rest = &lower[lower.find("count from ")? + "count from ".len()..];
    let (from, rest) = rest.split_once(" to ")?;
    let to: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let (from, to) = (from.trim().parse().ok()?, to.parse().ok()?);
    (from <= to && to - from <= 10_000).then_some((from, to))
}

/// The numbers `from` to `to`, separated by spaces, without `skip`.
pub fn counted(from: i64, to: i64, skip: Option<i64>) -> String {
    let numbers: Vec<String> = (from..=to)
        .filter(|n| Some(*n) != skip)
        .map(|n| n.to_string())
        .collect();
    numbers.join(" ")
}

/// The numbers of an arithmetic question, in the order they appear (`12`
/// and `7` for "What is 12 * 7?"), for a tool call's numeric arguments
/// (`fake/asks.rs`); `None` when `text` is not an arithmetic question.
pub fn operands(text: &str) -> Option<Vec<f64>> {
    let numbers = tokenize(question(text)?)?
        .into_iter()
        .filter_map(|t| match t {
            Tok::Num(q) => Some(q.num as f64 / q.den as f64),
            _ => None,
        })
        .collect();
    Some(numbers)
}

/// What the fake says to anything else.
pub const NOT_ARITHMETIC: &str = "I am one of llmprobe's fake providers: I only do arithmetic. \
Ask me something like \"What is 12 * 7?\" or \"what is seven times six\".";

/// An exact rational, `num / den` with `den > 0`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Q {
    num: i128,
    den: i128,
}

impl Q {
    fn int(n: i128) -> Q {
        Q { num: n, den: 1 }
    }

    fn new(num: i128, den: i128) -> Option<Q> {
        if den == 0 {
            return None;
        }
        let g = gcd(num.unsigned_abs(), den.unsigned_abs()).max(1) as i128;
        let sign = if den < 0 { -1 } else { 1 };
        Some(Q {
            num: sign * num / g,
            den: sign * den / g,
        })
    }

    fn add(self, o: Q) -> Option<Q> {
        Q::new(
            self.num
                .checked_mul(o.den)?
                .checked_add(o.num.checked_mul(self.den)?)?,
            self.den.checked_mul(o.den)?,
        )
    }

    fn neg(self) -> Q {
        Q {
            num: -self.num,
            den: self.den,
        }
    }

    fn mul(self, o: Q) -> Option<Q> {
        Q::new(self.num.checked_mul(o.num)?, self.den.checked_mul(o.den)?)
    }

    fn div(self, o: Q) -> Option<Q> {
        Q::new(self.num.checked_mul(o.den)?, self.den.checked_mul(o.num)?)
    }

    fn pow(self, e: Q) -> Option<Q> {
        if e.den != 1 || !(0..=64).contains(&e.num) {
            return None;
        }
        let e = e.num as u32;
        Some(Q {
            num: self.num.checked_pow(e)?,
            den: self.den.checked_pow(e)?,
        })
    }

    fn show(self) -> String {
        if self.den == 1 {
            return self.num.to_string();
        }
        let v = self.num as f64 / self.den as f64;
        let s = format!("{v:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(Q),
    Op(char),
    Open,
    Close,
}

/// Words that carry no meaning in a question ("what is", "please").
const FILLER: &[&str] = &[
    "what",
    "whats",
    "what's",
    "is",
    "are",
    "the",
    "of",
    "please",
    "calculate",
    "compute",
    "equals",
    "equal",
    "to",
    "tell",
    "me",
    "how",
    "much",
    "does",
    "do",
    "make",
    "makes",
    "and",
    "answer",
    "result",
    "reply",
    "with",
    "only",
    "number",
    "a",
    "an",
    "you",
    "can",
    "give",
];

fn word_number(w: &str) -> Option<i128> {
    const ONES: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 8] = [
        "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    if let Some(i) = ONES.iter().position(|x| *x == w) {
        return Some(i as i128);
    }
    TENS.iter()
        .position(|x| *x == w)
        .map(|i| (i as i128 + 2) * 10)
}

/// Words and symbols to tokens; `None` when something is neither a number,
/// an operator nor a filler word.
fn tokenize(text: &str) -> Option<Vec<Tok>> {
    let lower = text.to_lowercase();
    let mut spaced = String::new();
    let chars: Vec<char> = lower.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let between_letters = i > 0
            && chars[i - 1].is_alphabetic()
            && chars.get(i + 1).is_some_and(|n| n.is_alphabetic());
        match c {
            // "twenty-one" is one number, not a subtraction.
            '-' if between_letters => spaced.push(' '),
            '+' | '-' | '*' | '/' | '^' | '(' | ')' | '×' | '÷' | '−' => {
                spaced.push(' ');
                spaced.push(c);
                spaced.push(' ');
            }
            '?' | '!' | ',' | ':' | '=' => spaced.push(' '),
            c => spaced.push(c),
        }
    }
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i].trim_end_matches('.');
        let next = words.get(i + 1).map(|n| n.trim_end_matches('.'));
        let mut push_op = |c: char, skip: usize| {
            out.push(Tok::Op(c));
            i += skip;
        };
        match w {
            "+" | "plus" | "add" | "added" => push_op('+', 1),
            "-" | "−" | "minus" | "subtract" | "less" => push_op('-', 1),
            "*" | "x" | "×" | "times" => push_op('*', 1),
            "multiplied" | "divided" if next == Some("by") => {
                push_op(if w == "multiplied" { '*' } else { '/' }, 2)
            }
            "/" | "÷" | "over" => push_op('/', 1),
            "^" => push_op('^', 1),
            "squared" => {
                out.push(Tok::Op('^'));
                out.push(Tok::Num(Q::int(2)));
                i += 1;
            }
            "cubed" => {
                out.push(Tok::Op('^'));
                out.push(Tok::Num(Q::int(3)));
                i += 1;
            }
            "power" => push_op('^', 1),
            "(" => {
                out.push(Tok::Open);
                i += 1;
            }
            ")" => {
                out.push(Tok::Close);
                i += 1;
            }
            _ if FILLER.contains(&w) || w == "raised" || w == "by" => i += 1,
            _ => {
                let n = if let Ok(n) = w.parse::<i128>() {
                    Q::int(n)
                } else if let Some(q) = decimal(w) {
                    q
                } else {
                    // "twenty one" (and "twenty-one") is 21.
                    let n = word_number(w)?;
                    match next.and_then(word_number) {
                        Some(m) if n >= 20 && n % 10 == 0 && m < 10 => {
                            i += 1;
                            Q::int(n + m)
                        }
                        _ => Q::int(n),
                    }
                };
                out.push(Tok::Num(n));
                i += 1;
            }
        }
    }
    Some(out)
}

fn decimal(w: &str) -> Option<Q> {
    let (int, frac) = w.split_once('.')?;
    if frac.is_empty() || frac.len() > 12 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let den = 10i128.pow(frac.len() as u32);
    Q::new(whole * den + frac.parse::<i128>().ok()?, den)
}

struct Parser {
    tokens: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at)
    }

    fn eat_op(&mut self, ops: &[char]) -> Option<char> {
        match self.peek() {
            Some(Tok::Op(c)) if ops.contains(c) => {
                let c = *c;
                self.at += 1;
                Some(c)
            }
            _ => None,
        }
    }

    /// sum := product (('+'|'-') product)*
    fn expr(&mut self) -> Option<Q> {
        let mut v = self.product()?;
        while let Some(op) = self.eat_op(&['+', '-']) {
            let r = self.product()?;
            v = if op == '+' {
                v.add(r)?
            } else {
                v.add(r.neg())?
            };
        }
        Some(v)
    }

    /// product := power (('*'|'/') power)*
    fn product(&mut self) -> Option<Q> {
        let mut v = self.power()?;
        while let Some(op) = self.eat_op(&['*', '/']) {
            let r = self.power()?;
            v = if op == '*' { v.mul(r)? } else { v.div(r)? };
        }
        Some(v)
    }

    /// power := unary ('^' power)?   (right-associative)
    fn power(&mut self) -> Option<Q> {
        let base = self.unary()?;
        if self.eat_op(&['^']).is_some() {
            let e = self.power()?;
            return base.pow(e);
        }
        Some(base)
    }

    /// unary := '-' unary | atom
    fn unary(&mut self) -> Option<Q> {
        if self.eat_op(&['-']).is_some() {
            return Some(self.unary()?.neg());
        }
        self.atom()
    }

    fn atom(&mut self) -> Option<Q> {
        match self.peek()?.clone() {
            Tok::Num(q) => {
                self.at += 1;
                Some(q)
            }
            Tok::Open => {
                self.at += 1;
                let v = self.expr()?;
                if self.peek() != Some(&Tok::Close) {
                    return None;
                }
                self.at += 1;
                Some(v)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(q: &str) -> Option<String> {
        answer(q)
    }

    #[test]
    fn a_counting_task_reads_its_bounds() {
        let q = crate::capabilities::probe::count_question(12, 72);
        assert_eq!(count(&q), Some((12, 72)));
        assert_eq!(count("count from 3 to 5"), Some((3, 5)));
        assert_eq!(count("Count from 9 to 3."), None);
        assert_eq!(count("What is 2 + 2?"), None);
        assert_eq!(counted(3, 6, None), "3 4 5 6");
        assert_eq!(counted(3, 6, Some(4)), "3 5 6");
    }

    #[test]
    fn symbols() {
        for (q, want) in [
            ("What is 2+2?", "4"),
            ("2 + 3 * 4", "14"),
            ("(2 + 3) * 4", "20"),
            ("2^10", "1024"),
            ("2^3^2", "512"),
            ("7 × 6", "42"),
            ("84 ÷ 2", "42"),
            ("-3 - -4", "1"),
            ("1/3*3", "1"),
            ("10 / 4", "2.5"),
            ("1 / 3", "0.333333"),
            ("0.1 + 0.2", "0.3"),
            ("What is 12 * 7? Reply with only the number.", "84"),
        ] {
            assert_eq!(a(q).as_deref(), Some(want), "{q}");
        }
    }

    #[test]
    fn words() {
        for (q, want) in [
            ("what is seven times six", "42"),
            ("twelve divided by four", "3"),
            ("What's twenty-one plus one?", "22"),
            ("twenty one minus 1", "20"),
            ("3 squared", "9"),
            ("2 cubed plus 1", "9"),
            ("6 multiplied by 7", "42"),
            ("2 to the power of 8", "256"),
        ] {
            assert_eq!(a(q).as_deref(), Some(want), "{q}");
        }
    }

    #[test]
    fn operands_in_order() {
        assert_eq!(operands("What is 12*7?"), Some(vec![12.0, 7.0]));
        assert_eq!(operands("twelve divided by four"), Some(vec![12.0, 4.0]));
        // "squared" brings its own 2.
        assert_eq!(operands("3 squared"), Some(vec![3.0, 2.0]));
        assert_eq!(operands("0.5 + 1"), Some(vec![0.5, 1.0]));
        assert_eq!(operands("Hello there"), None);
        assert_eq!(operands("42"), None);
    }

    #[test]
    fn a_question_among_other_sentences_is_found() {
        assert_eq!(answer("What is 6 * 7? Answer in JSON."), Some("42".into()));
        assert_eq!(
            operands("What is 12 + 30? Use the add tool."),
            Some(vec![12.0, 30.0])
        );
        assert_eq!(answer("Be terse.\nwhat is 1.5 + 1.5"), Some("3".into()));
        assert_eq!(answer("Hello. How are you?"), None);
    }

    #[test]
    fn not_arithmetic() {
        for q in [
            "Hello there",
            "What is the capital of France?",
            "42",
            "",
            "2 +",
            "(2 + 3",
            "1 / 0",
            "2 ^ 1000",
            "what is 2 plus banana",
        ] {
            assert_eq!(a(q), None, "{q}");
        }
    }
}
