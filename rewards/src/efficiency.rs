//! Tool-use features: `C` (calls), `T` (turns), `c = C / T`, and FuseSearch's
//! tool efficiency `e`.
//!
//! `e` is the mean over calls of the share of a call's entities that no
//! earlier call of the rollout returned. Decisions: a call's entities are
//! counted once each (a grep that reports the same `path:line` twice returned
//! one entity); a call that returns nothing scores 0 (it bought no
//! information); calls of one turn count in the order listed, so of two
//! parallel calls returning the same hit only the first is credited; a
//! rollout with no calls has `e = 0`.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::Hash;

use rewardlab_protocol::Entity;

use crate::rollout::LoggedCall;

/// The entity a tool hit names: `path:line` for grep and read, `path` for
/// glob (and for any other tool that returns paths without lines).
pub fn entity(tool: &str, path: &str, line: Option<u32>) -> Entity {
    match (tool, line) {
        ("glob", _) | (_, None) => Entity::Path(crate::paths::normalize_lossy(path)),
        (_, Some(line)) => Entity::line(crate::paths::normalize_lossy(path), u64::from(line)),
    }
}

/// Tool calls issued over all turns.
pub fn calls<C>(turns: &[Vec<C>]) -> usize {
    turns.iter().map(Vec::len).sum()
}

/// `c = C / T`; 0 when there are no turns (the loader rejects that case).
pub fn calls_per_turn<C>(turns: &[Vec<C>]) -> f64 {
    if turns.is_empty() { 0.0 } else { calls(turns) as f64 / turns.len() as f64 }
}

/// Why `e` cannot be computed for a rollout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool call {call} of turn {turn} has no `entities`")]
pub struct MissingEntities {
    /// The turn, 1-based.
    pub turn: usize,
    /// The call within its turn, 1-based.
    pub call: usize,
}

/// Tool efficiency `e` in [0, 1]. Every call must list its entities (an
/// absent list is not an empty result: the source did not record it).
pub fn tool_efficiency(turns: &[Vec<LoggedCall>]) -> Result<f64, MissingEntities> {
    efficiency_of(turns, |c| c.entities.as_deref())
}

/// [`tool_efficiency`] over any call type: `entities` gives a call's list,
/// `None` when it was not recorded. Entities are compared with `==` (an
/// [`Entity`], or the text that spells one: the same thing).
pub(crate) fn efficiency_of<C, E: Eq + Hash>(
    turns: &[Vec<C>],
    entities: impl Fn(&C) -> Option<&[E]>,
) -> Result<f64, MissingEntities> {
    let total_entities: usize = turns.iter().flatten().map(|c| entities(c).map_or(0, <[E]>::len)).sum();
    // Each entity maps to the last call that returned it: one lookup per entity
    // tells a new entity, one returned earlier, and a repeat within this call apart.
    // foldhash (fixed seed): entities are short and not adversarial, and the
    // hash is most of `e`'s time.
    let mut last_call: HashMap<&E, usize, foldhash::fast::FixedState> =
        HashMap::with_capacity_and_hasher(total_entities, foldhash::fast::FixedState::default());
    let mut total = 0.0;
    let mut n = 0usize;
    for (t, turn) in turns.iter().enumerate() {
        for (k, call) in turn.iter().enumerate() {
            let entities = entities(call).ok_or(MissingEntities { turn: t + 1, call: k + 1 })?;
            n += 1;
            let (mut distinct, mut new) = (0usize, 0usize);
            for e in entities {
                // One hash per entity: the entry is found or made at once.
                match last_call.entry(e) {
                    Entry::Vacant(slot) => {
                        slot.insert(n);
                        distinct += 1;
                        new += 1;
                    }
                    Entry::Occupied(slot) if *slot.get() == n => {}
                    Entry::Occupied(mut slot) => {
                        *slot.get_mut() = n;
                        distinct += 1;
                    }
                }
            }
            if distinct > 0 {
                total += new as f64 / distinct as f64;
            }
        }
    }
    Ok(if n == 0 { 0.0 } else { total / n as f64 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(entities: &[&str]) -> LoggedCall {
        LoggedCall {
            tool: "grep".into(),
            args: serde_json::Value::Null,
            entities: Some(entities.iter().map(|s| Entity::parse(s)).collect()),
        }
    }

    #[test]
    fn efficiency_counts_new_entities_in_listed_order() {
        let turns =
            vec![vec![call(&["a:1", "a:2"]), call(&["a:2", "b:1"])], vec![call(&[]), call(&["a:1", "a:1"])], vec![]];
        // Calls score 1, 1/2, 0 (empty), 0 (all seen): mean 1.5 / 4.
        assert_eq!(tool_efficiency(&turns), Ok(0.375));
        assert_eq!(calls(&turns), 4);
        assert!((calls_per_turn(&turns) - 4.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn no_calls_is_zero_and_missing_entities_is_an_error() {
        assert_eq!(tool_efficiency(&[vec![]]), Ok(0.0));
        let mut c = call(&[]);
        c.entities = None;
        assert_eq!(tool_efficiency(&[vec![call(&["x"])], vec![c]]), Err(MissingEntities { turn: 2, call: 1 }));
    }

    #[test]
    fn entity_shapes() {
        assert_eq!(entity("grep", "./a.py", Some(3)), "a.py:3");
        assert_eq!(entity("read", "a.py", Some(10)), "a.py:10");
        assert_eq!(entity("glob", "a.py", Some(10)), "a.py");
    }
}
