//! reach-core: the turn owner. Holds the Phylactery; no network, no credential.

mod ports;

fn main() -> std::process::ExitCode {
    reach_runtime::run("core", |role| {
        let result = (|| {
            role.serve("core.admission", ports::admission())?;
            role.serve("core.delivery", ports::delivery())?;
            role.serve("core.trail", ports::trail())?;
            Ok(())
        })();
        async move { result }
    })
}
