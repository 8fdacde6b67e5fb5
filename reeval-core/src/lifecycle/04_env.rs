//! The env phase: `CI=1 TERM=dumb NO_COLOR=1`, the eval's variables, and a
//! placeholder for every secret the sandbox may know of (never a value).

use crate::environment::Environment;
use crate::sandbox::AgentUser;
use crate::secrets::{Secret, SecretScope};

/// The environment every command of the sandbox gets, and the phase's detail.
pub(crate) fn variables(env: &Environment, secrets: &[Secret]) -> (Vec<(String, String)>, String) {
    let mut vars = vec![
        ("CI".to_string(), "1".to_string()),
        ("TERM".into(), "dumb".into()),
        ("NO_COLOR".into(), "1".into()),
        ("HOME".into(), AgentUser::HOME.into()),
    ];
    vars.extend(env.env.iter().cloned());
    let placeholders: Vec<(String, String)> = secrets
        .iter()
        .filter(|s| s.scope == SecretScope::Placeholder)
        .map(|s| (s.name.clone(), s.placeholder()))
        .collect();
    let detail = format!(
        "CI TERM NO_COLOR + {} variables, {} secret placeholders",
        env.env.len(),
        placeholders.len()
    );
    vars.extend(placeholders);
    (vars, detail)
}

/// The sandbox's variables as its container gets them: [`variables`], the
/// egress gateway's (the proxy, the CA, base URLs) when it has a way out,
/// and the services' hosts kept off the proxy. One place for the start and
/// for a container made ahead of its slot, so both run with the same.
pub(crate) fn sandbox_variables(
    env: &Environment,
    secrets: &[Secret],
    egress: Option<&crate::gateway::attempt::Plan>,
) -> (Vec<(String, String)>, String) {
    let (mut vars, detail) = variables(env, secrets);
    vars.extend(egress.map(|p| p.variables()).unwrap_or_default());
    crate::sandbox::service::bypass_proxy(&mut vars, &env.services);
    (vars, detail)
}
