//! Property tests of the state machine (docs/formats.md, "The state
//! machine"): random sequences of probe outcomes, hand changes and
//! degraded-mode recoveries go through the real code (the outcome's
//! [`Outcome::verdict`], then [`States::apply_probe_waiting`], as `check`'s
//! writer applies a probe; [`States::change_by_hand`] and
//! [`States::remove`]/[`States::clear`] as `llmprobe state` does;
//! [`States::recover_served`] as degraded mode does), and after every step
//! the entry is compared with a model of the documented rules written out
//! here, not computed by the code under test.

use proptest::prelude::*;

use super::*;
use crate::outcome::{FailureType, Outcome};

const KEY: &str = "p::m";
const OTHER: &str = "q::other";

/// One thing that can happen to the model.
#[derive(Clone)]
enum Op {
    /// A probe: `None` passed, else its failure class; `unreachable` for a
    /// host that could not be reached; `wait` the explicit wait it carried
    /// (minutes ahead); `reprobe` for a re-probe of a paused model (the
    /// source only marks the log entry: the state machine is the same).
    Probe {
        failure: Option<FailureType>,
        unreachable: bool,
        wait: Option<u8>,
        reprobe: bool,
    },
    /// `llmprobe state enable|pause|disable`.
    ByHand(ModelState),
    /// `llmprobe state reset P::M`, or `--all`.
    Reset { all: bool },
    /// A paused model served a request in degraded mode.
    Served,
}

/// On one line, so that a shrunk failure reads as a story.
impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Probe {
                failure,
                unreachable,
                wait,
                reprobe,
            } => {
                write!(f, "{}", if *reprobe { "reprobe " } else { "probe " })?;
                match failure {
                    None => write!(f, "pass")?,
                    Some(x) => write!(f, "{x}")?,
                }
                if *unreachable {
                    write!(f, " (unreachable)")?;
                }
                match wait {
                    Some(w) => write!(f, " wait {w}m"),
                    None => Ok(()),
                }
            }
            Op::ByHand(to) => write!(f, "by hand: {to}"),
            Op::Reset { all: false } => write!(f, "reset"),
            Op::Reset { all: true } => write!(f, "reset --all"),
            Op::Served => write!(f, "served in degraded mode"),
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    let failure = prop_oneof![
        2 => Just(None),
        5 => proptest::sample::select(
            <FailureType as strum::IntoEnumIterator>::iter().collect::<Vec<_>>()
        )
        .prop_map(Some),
    ];
    let probe = (
        failure,
        proptest::bool::weighted(0.15),
        proptest::option::weighted(0.3, 1u8..120),
        any::<bool>(),
    )
        .prop_map(|(failure, unreachable, wait, reprobe)| Op::Probe {
            // Only a failed probe can have failed to reach its host, or
            // carry a wait.
            unreachable: unreachable && failure.is_some(),
            wait: wait.filter(|_| failure.is_some()),
            failure,
            reprobe,
        });
    prop_oneof![
        12 => probe,
        1 => proptest::sample::select(vec![
            ModelState::Active,
            ModelState::Paused,
            ModelState::Disabled
        ])
        .prop_map(Op::ByHand),
        1 => any::<bool>().prop_map(|all| Op::Reset { all }),
        1 => Just(Op::Served),
    ]
}

/// The rules, written out: what the model's entry must say.
#[derive(Debug, Clone, PartialEq)]
struct Model {
    state: ModelState,
    /// Hard failures since the last pass, enable or reset (those a
    /// disabled model met are not probes of it: it is never probed).
    failures: u32,
}

/// What docs/formats.md calls a temporary failure.
fn temporary(failure: FailureType, unreachable: bool) -> bool {
    unreachable
        || matches!(
            failure,
            FailureType::Timeout | FailureType::RateLimit | FailureType::HttpError
        )
}

fn ts(i: usize) -> String {
    crate::time::format_ts(
        chrono::DateTime::from_timestamp(1_795_000_000 + i as i64 * 60, 0).unwrap(),
    )
}

fn run(disable_after: u32, ops: &[Op]) -> std::result::Result<(), TestCaseError> {
    let mut states = States::default();
    // Another model, that nothing here may touch (but `reset --all`).
    let mut other = StateEntry::active();
    other.state = ModelState::Paused;
    other.reason = Some("timeout".into());
    other.since = Some(ts(0));
    states.set(OTHER, other.clone());
    let mut other_present = true;
    let mut m = Model {
        state: ModelState::Active,
        failures: 0,
    };
    for (i, op) in ops.iter().enumerate() {
        let now = ts(i + 1);
        let before = states.get(KEY);
        let from = states.state_of(KEY);
        let mut transition = None;
        let mut by_hand = false;
        match *op {
            Op::Probe {
                failure,
                unreachable,
                wait,
                reprobe: _,
            } => {
                let outcome = Outcome {
                    failure,
                    latency_ms: 10,
                    status: None,
                    error: None,
                    unreachable,
                    retry_at: None,
                    model_gone: false,
                    timing: Default::default(),
                };
                let retry_at = wait.map(|w| ts(i + 1 + usize::from(w)));
                transition = states.apply_probe_waiting(
                    KEY,
                    outcome.verdict(),
                    &now,
                    disable_after,
                    retry_at.as_deref(),
                );
                // A disabled model is never probed; one probed all the same
                // (the state changed during the run) stays as it was.
                if m.state != ModelState::Disabled {
                    match failure {
                        None => {
                            m.failures = 0;
                            m.state = ModelState::Active;
                        }
                        Some(f) if temporary(f, unreachable) => {
                            prop_assert_eq!(
                                outcome.verdict(),
                                Verdict::Temporary(if unreachable {
                                    crate::outcome::UNREACHABLE
                                } else {
                                    f.as_str()
                                })
                            );
                            m.state = ModelState::Paused;
                        }
                        Some(f) => {
                            prop_assert_eq!(outcome.verdict(), Verdict::Hard(f.as_str()));
                            m.failures += 1;
                            if m.failures >= disable_after {
                                m.state = ModelState::Disabled;
                            }
                        }
                    }
                }
                let after = states.get(KEY);
                if from == ModelState::Disabled {
                    prop_assert_eq!(&after, &before, "a probe changed a disabled model");
                } else {
                    let after = after.as_ref();
                    // Each probe sets or clears the wait: a pass, or a
                    // failure that named none, clears it; it is kept only
                    // while the model is paused.
                    let want_wait = match (failure, m.state) {
                        (Some(_), ModelState::Paused) => retry_at.clone(),
                        _ => None,
                    };
                    prop_assert_eq!(
                        after.and_then(|e| e.retry_at.clone()),
                        want_wait,
                        "retry_at after {:?}",
                        op
                    );
                    // A pass that brings a paused model back says when.
                    if failure.is_none() && from == ModelState::Paused {
                        prop_assert_eq!(after.and_then(|e| e.recovered_at.as_deref()), Some(&*now));
                    } else {
                        prop_assert_eq!(
                            after.and_then(|e| e.recovered_at.clone()),
                            before.as_ref().and_then(|e| e.recovered_at.clone())
                        );
                    }
                }
            }
            Op::ByHand(to) => {
                by_hand = true;
                let changed = states.change_by_hand(KEY, to, None, &now);
                prop_assert_eq!(
                    changed.is_none(),
                    before.is_none() && to == ModelState::Active
                );
                if to == ModelState::Active {
                    m.failures = 0;
                }
                m.state = to;
            }
            Op::Reset { all } => {
                by_hand = true;
                if all {
                    states.clear();
                    other_present = false;
                } else {
                    states.remove(KEY);
                }
                m = Model {
                    state: ModelState::Active,
                    failures: 0,
                };
            }
            Op::Served => {
                let changed = states.recover_served(KEY, &now, "served in degraded mode");
                prop_assert_eq!(changed, m.state == ModelState::Paused);
                if m.state == ModelState::Paused {
                    m.state = ModelState::Active;
                    m.failures = 0;
                }
            }
        }
        let e = states.get(KEY).unwrap_or_else(StateEntry::active);
        let to = e.state;
        // The model of the rules and the code agree.
        prop_assert_eq!(to, m.state, "state after {:?}", op);
        prop_assert_eq!(e.consecutive_failures, m.failures, "count after {:?}", op);
        // Leaving `disabled` takes a person.
        if from == ModelState::Disabled && to != ModelState::Disabled {
            prop_assert!(by_hand, "{:?} took a disabled model to {}", op, to);
        }
        // A temporary failure never disables.
        if let Op::Probe {
            failure: Some(f),
            unreachable,
            ..
        } = *op
            && temporary(f, unreachable)
        {
            prop_assert!(to != ModelState::Disabled || from == ModelState::Disabled);
        }
        // Nothing but `disable_after` hard failures in a row disables, or
        // a person. (More than that when a person paused a disabled model:
        // the count is kept, and the next hard failure disables it again.)
        if to == ModelState::Disabled && from != ModelState::Disabled && !by_hand {
            prop_assert!(
                matches!(
                    op,
                    Op::Probe {
                        failure: Some(_),
                        ..
                    }
                ),
                "{:?}",
                op
            );
            prop_assert!(e.consecutive_failures >= disable_after);
        }
        // A change of state is reported, and moves `since` to now; no
        // other step moves it, but a hand change may fill in a missing one.
        let since_before = before.as_ref().and_then(|e| e.since.clone());
        if from != to {
            prop_assert_eq!(
                e.since.as_deref(),
                (!matches!(op, Op::Reset { .. })).then_some(&*now)
            );
            if let Op::Probe { .. } = op {
                let t = transition.expect("a probe that changes the state says so");
                prop_assert_eq!((t.from, t.to), (from, to));
            }
        } else {
            prop_assert!(transition.is_none(), "{:?}", transition);
            if let Op::Reset { .. } = op {
                prop_assert_eq!(e.since, None);
            } else if !(by_hand && since_before.is_none()) {
                prop_assert_eq!(e.since, since_before, "since moved without a change");
            }
        }
        // Only a reset --all touches another model.
        prop_assert_eq!(states.get(OTHER), other_present.then(|| other.clone()));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn state_machine_keeps_the_documented_rules(
        disable_after in 1u32..=4,
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        run(disable_after, &ops)?;
    }
}
