//! Parallel tool calls in a stream whose shape writes one block or item at
//! a time (Anthropic messages, Responses). An upstream may interleave the
//! argument fragments of parallel calls (OpenAI chat chunks carry an
//! `index` on each), which such a shape cannot say: a closed block takes
//! no more deltas. [`Holdback`] lets the first call stream live, and keeps
//! every other call, and any text that comes while a call is open, to be
//! written whole when the reply ends.

use crate::upstream::dialect::{ReplyDelta, ToolCallDelta};

/// What a stream writer passes on now and what it writes at the end. The
/// first tool call streams live, fragment by fragment; while it is open,
/// other calls' fragments (gathered by index: id, name, arguments) and
/// text are held, in the order they first came.
#[derive(Debug, Default)]
pub struct Holdback {
    /// The index of the call streaming live, once one opened.
    live: Option<usize>,
    held: Vec<Held>,
}

#[derive(Debug)]
enum Held {
    Text(String),
    Call(ToolCallDelta),
}

impl Holdback {
    /// A new holdback with nothing open or held.
    pub fn new() -> Holdback {
        Holdback::default()
    }

    /// `d` if the writer is to write it now, or `None` when it is held
    /// for [`Holdback::end`]. Only `Text` and `ToolCall` deltas are ever
    /// held; every other delta comes back as it is.
    pub fn pass(&mut self, d: ReplyDelta) -> Option<ReplyDelta> {
        match (d, self.live) {
            (ReplyDelta::ToolCall(c), None) => {
                self.live = Some(c.index);
                Some(ReplyDelta::ToolCall(c))
            }
            (ReplyDelta::ToolCall(c), Some(live)) if c.index == live => {
                Some(ReplyDelta::ToolCall(c))
            }
            (ReplyDelta::ToolCall(c), Some(_)) => {
                let known = self.held.iter_mut().find_map(|h| match h {
                    Held::Call(k) if k.index == c.index => Some(k),
                    _ => None,
                });
                match known {
                    Some(k) => {
                        k.id = k.id.take().or(c.id);
                        k.name = k.name.take().or(c.name);
                        k.arguments.push_str(&c.arguments);
                    }
                    None => self.held.push(Held::Call(c)),
                }
                None
            }
            (ReplyDelta::Text(t), Some(_)) => {
                match self.held.last_mut() {
                    Some(Held::Text(s)) => s.push_str(&t),
                    _ => self.held.push(Held::Text(t)),
                }
                None
            }
            (d, _) => Some(d),
        }
    }

    /// What was held, each whole (a call with all of its arguments in
    /// one fragment, text in one piece), in the order each first came:
    /// for the writer to write, after closing the live call, when the
    /// reply ends. Nothing is held afterwards.
    pub fn end(&mut self) -> Vec<ReplyDelta> {
        self.held
            .drain(..)
            .map(|h| match h {
                Held::Text(t) => ReplyDelta::Text(t),
                Held::Call(c) => ReplyDelta::ToolCall(c),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(index: usize, head: Option<(&str, &str)>, arguments: &str) -> ReplyDelta {
        ReplyDelta::ToolCall(ToolCallDelta {
            index,
            id: head.map(|h| h.0.to_string()),
            name: head.map(|h| h.1.to_string()),
            arguments: arguments.to_string(),
        })
    }

    #[test]
    fn the_first_call_streams_and_others_and_later_text_are_held_whole_in_order() {
        let mut h = Holdback::new();
        let text = ReplyDelta::Text("Let me look.".into());
        assert_eq!(h.pass(text.clone()), Some(text));
        let a0 = call(0, Some(("a", "f")), "");
        assert_eq!(h.pass(a0.clone()), Some(a0));
        assert_eq!(h.pass(call(1, Some(("b", "g")), "")), None);
        let a1 = call(0, None, "{\"x\":");
        assert_eq!(h.pass(a1.clone()), Some(a1));
        assert_eq!(h.pass(call(1, None, "{\"y\":")), None);
        assert_eq!(h.pass(ReplyDelta::Text("And ".into())), None);
        assert_eq!(h.pass(ReplyDelta::Text("more.".into())), None);
        assert_eq!(h.pass(call(1, None, "2}")), None);
        let a2 = call(0, None, "1}");
        assert_eq!(h.pass(a2.clone()), Some(a2));
        let fin = ReplyDelta::Finish("tool_calls".into());
        assert_eq!(h.pass(fin.clone()), Some(fin));
        assert_eq!(
            h.end(),
            vec![
                call(1, Some(("b", "g")), "{\"y\":2}"),
                ReplyDelta::Text("And more.".into()),
            ]
        );
        assert!(h.end().is_empty());
    }
}
