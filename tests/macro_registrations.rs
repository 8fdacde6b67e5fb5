// Every option, none, and a `main` that reads back what the attribute registered.
use reeval::__private::{EvalRegistration, VariantRegistration, inventory};
use reeval::prelude::*;

mod envs {
    pub fn python() -> reeval::Environment {
        reeval::Environment::new()
    }
}

#[reeval::eval(
    timeout = "10m",
    deadline = "1h 30m",
    trials = 3,
    harness = ["shell", "claude-code:sonnet"],
    environment = envs::python,
    tags = ["python", "smoke"],
    ignore,
    judge = "anthropic:claude-sonnet-4-5",
)]
async fn every_option(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

#[reeval::eval(
    judge = "openai:gpt-5",
    ignore,
    tags = "single",
    harness = "shell",
    trials = 1,
    timeout = "90s"
)]
pub async fn any_order_and_single_strings(_ctx: &mut reeval::Ctx) -> reeval::Result<()> {
    Ok(())
}

async fn solve(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

#[reeval::eval(oracle = solve)]
async fn with_an_oracle(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

#[reeval::variant]
fn with_rules(env: Environment) -> Environment {
    env.rules("Be brief.")
}

#[reeval::eval]
async fn bare(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

#[reeval::eval]
async fn asks_a_judge(c: &mut Ctx) -> reeval::Result<()> {
    c.send("Write greet.py").await?;
    c.judge("greet.py greets by name").await?;
    Ok(())
}

#[reeval::eval]
async fn names_its_judges_model(c: &mut Ctx) -> reeval::Result<()> {
    c.judge(Judge::new().criterion("tidy").model("openai:gpt-4.1")).await?;
    Ok(())
}

mod nested {
    #[reeval::eval]
    pub async fn in_a_module(_: &mut reeval::Ctx) -> reeval::Result<()> {
        Ok(())
    }
}

fn registration(name: &str) -> &'static EvalRegistration {
    inventory::iter::<EvalRegistration>
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("`{name}` is not registered"))
}

fn main() {
    let r = registration("every_option");
    assert!(!r.module.contains("::"), "{}", r.module); // the crate root
    assert!(r.file.ends_with("registrations.rs"), "{}", r.file);
    assert_eq!(r.line, 21);
    assert_eq!(r.timeout_ms, Some(600_000));
    assert_eq!(r.deadline_ms, Some(5_400_000));
    assert_eq!(r.trials, Some(3));
    assert_eq!(r.harnesses, ["shell", "claude-code:sonnet"]);
    assert!(r.environment.is_some());
    assert_eq!(r.tags, ["python", "smoke"]);
    assert!(r.ignore);
    assert_eq!(r.judge, Some("anthropic:claude-sonnet-4-5"));

    let r = registration("any_order_and_single_strings");
    assert_eq!(r.timeout_ms, Some(90_000));
    assert_eq!(r.deadline_ms, None);
    assert_eq!(r.trials, Some(1));
    assert_eq!(r.harnesses, ["shell"]);
    assert!(r.environment.is_none());
    assert_eq!(r.tags, ["single"]);
    assert_eq!(r.judge, Some("openai:gpt-5"));

    let r = registration("bare");
    assert_eq!((r.timeout_ms, r.deadline_ms, r.trials), (None, None, None));
    assert!(r.harnesses.is_empty() && r.tags.is_empty());
    assert!(r.environment.is_none() && r.judge.is_none() && !r.ignore);

    assert!(registration("in_a_module").module.ends_with("::nested"));
    assert!(registration("with_an_oracle").oracle.is_some());
    assert!(registration("bare").oracle.is_none());
    // The macro sees a judge asked for in the body; one whose model the body names needs none chosen.
    assert!(registration("asks_a_judge").uses_judge);
    assert!(!registration("bare").uses_judge && !registration("every_option").uses_judge);
    assert!(!registration("names_its_judges_model").uses_judge);
    assert!(registration("asks_a_judge").to_eval().options().uses_judge);
    let variant = inventory::iter::<VariantRegistration>
        .into_iter()
        .find(|v| v.name == "with_rules")
        .expect("the variant is registered");
    assert_eq!((variant.apply)(Environment::new()), Environment::new().rules("Be brief."));

    // The functions are left as written and can still be called directly.
    let _ = every_option;
    let _ = any_order_and_single_strings;
    let _ = bare;
    let _ = (asks_a_judge, names_its_judges_model);
    let _ = nested::in_a_module;
    let _ = with_rules;
}
