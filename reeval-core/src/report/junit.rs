//! `--junit PATH`: JUnit XML (written with `quick-junit`), one testcase per
//! attempt, retried tries included. A testcase's name is
//! `<eval> [<harness>] #<trial> try <try>` and its classname the eval; a fail
//! is a `<failure type="assertion|judge|timeout|agent">`, an infra error an
//! `<error type="infra|config">`, each carrying the message and the record's
//! path (also in the testcase's `system-out` and its `record` property).
//! Its `cell` property says how its cell (eval × harness) ended: `passed`,
//! `failed`, or `no_graded_attempts` (infra and config errors only). An
//! attempt that recorded a reward has a `reward` property (its one number,
//! see [`crate::stats::reward::scalar`]) and one `reward.<key>` per key; its
//! cell's `cell.meanReward` and `cell.meanRewardInterval` (`low..high`, 95 %)
//! are properties too.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::Reporter;
use crate::outcome::Outcome;
use crate::report::events::RunEvent;
use crate::report::summary::RunReport;

/// Writes the run's JUnit XML when it ends.
#[derive(Debug)]
pub struct Junit {
    path: PathBuf,
}

impl Junit {
    /// A report written to `path`.
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }
}

/// The run as a JUnit report.
/// The eval's own output for `system-out`, without the control characters
/// (colour codes' ESC) that XML 1.0 cannot hold.
fn xml_text(output: Option<&str>) -> String {
    output.unwrap_or("").chars().filter(|c| matches!(c, '\n' | '\t') || !c.is_control()).collect()
}

/// The JUnit report of a run: a test case per attempt.
pub fn render(report: &RunReport) -> Report {
    let mut suite = TestSuite::new("reeval");
    for r in &report.records {
        let record = report.run_dir.join(r.file_name()).display().to_string();
        let mut status = match r.outcome {
            Outcome::Pass => TestCaseStatus::success(),
            Outcome::Fail(_) => TestCaseStatus::non_success(NonSuccessKind::Failure),
            Outcome::InfraError | Outcome::Config => {
                TestCaseStatus::non_success(NonSuccessKind::Error)
            }
        };
        if let Some(kind) = r.outcome.kind() {
            let message = r.message.as_deref().unwrap_or("");
            status
                .set_type(kind.as_str())
                .set_message(message.lines().next().unwrap_or(""))
                .set_description(format!("{message}\nrecord: {record}"));
        }
        let mut case = TestCase::new(
            format!(
                "{} [{}] #{} try {}",
                r.eval,
                super::arm_label(&r.harness, r.arm.as_deref()),
                r.trial,
                r.try_
            ),
            status,
        );
        case.set_classname(r.eval.clone())
            .set_time(Duration::from_millis(r.timings.total_ms))
            .set_system_out(format!("record: {record}\n{}", xml_text(r.output.as_deref())))
            .add_property(Property::new("record", record))
            .add_property(Property::new("harness", r.harness.clone()));
        let cell = report
            .summary
            .cells
            .iter()
            .find(|c| c.eval == r.eval && c.harness == r.harness && c.arm == r.arm);
        if let Some(cell) = cell {
            case.add_property(Property::new("cell", cell.status.as_str()));
            if let Some(reward) = &cell.reward {
                case.add_property(Property::new("cell.meanReward", reward.mean.to_string()));
                if let Some([lo, hi]) = reward.interval {
                    case.add_property(Property::new(
                        "cell.meanRewardInterval",
                        format!("{lo}..{hi}"),
                    ));
                }
            }
        }
        if let Some(reward) = &r.reward {
            if let Some(one) = crate::stats::reward::scalar(reward) {
                case.add_property(Property::new("reward", one.to_string()));
            }
            for (key, value) in reward {
                case.add_property(Property::new(format!("reward.{key}"), value.to_string()));
            }
        }
        suite.add_test_case(case);
    }
    let mut junit = Report::new(format!("reeval run {}", report.run_id));
    junit.add_test_suite(suite);
    junit
}

impl Reporter for Junit {
    fn event(&mut self, _event: &RunEvent) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self, report: &RunReport) -> io::Result<()> {
        let xml = render(report).to_string().map_err(io::Error::other)?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        crate::secrets::write_atomically(&self.path, xml.as_bytes()).map_err(|e| {
            io::Error::new(e.kind(), format!("failed to write {}: {e}", self.path.display()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_records::test_record as rec;

    #[test]
    fn each_testcase_says_how_its_cell_ended() {
        let records =
            vec![rec("ok", 1, 1, Outcome::Pass), rec("broken", 1, 1, Outcome::InfraError)];
        let summary = crate::report::summary::summarize("run", &records);
        let report =
            RunReport { run_id: "run".into(), run_dir: "/runs/run".into(), records, summary };
        let xml = render(&report).to_string().unwrap();
        assert!(xml.contains(r#"<property name="cell" value="passed"/>"#), "{xml}");
        assert!(xml.contains(r#"<property name="cell" value="no_graded_attempts"/>"#), "{xml}");
    }

    #[test]
    fn rewards_are_properties_of_the_attempt_and_its_cell() {
        let mut a = rec("task", 1, 1, Outcome::Pass);
        a.reward = Some([("reward".to_string(), 1.0), ("accuracy".to_string(), 0.5)].into());
        let mut b = rec("task", 2, 1, Outcome::Fail(crate::outcome::FailKind::Assertion));
        b.reward = Some([("reward".to_string(), 0.0)].into());
        let records = vec![a, b];
        let summary = crate::report::summarize("run", &records);
        let report =
            RunReport { run_id: "run".into(), run_dir: "/runs/run".into(), records, summary };
        let xml = render(&report).to_string().unwrap();
        assert!(xml.contains(r#"<property name="reward" value="1"/>"#), "{xml}");
        assert!(xml.contains(r#"<property name="reward.accuracy" value="0.5"/>"#), "{xml}");
        assert!(xml.contains(r#"<property name="cell.meanReward" value="0.5"/>"#), "{xml}");
        assert!(xml.contains(r#"name="cell.meanRewardInterval" value="0.0"#), "{xml}");
    }

    #[test]
    fn the_evals_output_is_in_system_out_without_control_characters() {
        let mut printed = rec("chatty", 1, 1, Outcome::Pass);
        printed.output = Some("\u{1b}[32mgreen\u{1b}[0m <done>\n".into());
        let records = vec![printed];
        let summary = crate::report::summary::summarize("run", &records);
        let report =
            RunReport { run_id: "run".into(), run_dir: "/runs/run".into(), records, summary };
        let xml = render(&report).to_string().unwrap();
        assert!(xml.contains("[32mgreen[0m &lt;done&gt;\n</system-out>"), "{xml}");
        assert!(!xml.contains('\u{1b}'), "{xml}");
    }
}
