//! The receipt's resource ceilings, read from the kernel for each role process of a body whose
//! manager sets them (a Quadlet body; the launcher's dev profile sets none):
//!
//! - `resources/pids`: the process ceiling as the role user's `RLIMIT_NPROC`, soft and hard
//!   (`/proc/<pid>/limits`), which the kernel holds with or without a cgroup;
//! - `resources/memory`: the memory limit of the cgroup the process is in (`memory.max` on
//!   cgroup v2, `memory.limit_in_bytes` where the memory controller is on a v1 hierarchy).
//!   Rootless Podman on cgroup v1 sets none, and the check says so rather than pass on the
//!   unit's word.

use std::path::PathBuf;

use reach_manifest::Manifest;

use super::{Check, Processes, RoleProcess};

/// Where the cgroup hierarchies are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Both ceiling checks for `processes`.
pub(super) fn ceilings(manifest: &Manifest, processes: &Processes) -> [Check; 2] {
    let listed = match processes {
        Processes::Listed(p) => p,
        Processes::Launcher => {
            let why = "the launcher's dev profile runs roles without ceilings; a Quadlet body \
                       (--podman) is checked";
            return [
                Check::skipped("resources/pids", why),
                Check::skipped("resources/memory", why),
            ];
        }
    };
    let mut pids = Vec::new();
    let mut memory = Vec::new();
    for role in &manifest.roles {
        let name = role.name.as_str();
        let Some(p) = listed.iter().find(|p| p.role == name) else {
            pids.push(format!("{name}: no process"));
            memory.push(format!("{name}: no process"));
            continue;
        };
        if let Err(e) = process_ceiling(p, role.limits.pids) {
            pids.push(format!("{name}: {e}"));
        }
        if let Err(e) = memory_ceiling(p, u64::from(role.limits.memory_mib) << 20) {
            memory.push(format!("{name}: {e}"));
        }
    }
    let n = manifest.roles.len();
    let verdict = |id: &str, broken: Vec<String>, held: &str| {
        if broken.is_empty() {
            Check::observed(id, true, format!("{n} role processes {held}"))
        } else {
            Check::observed(id, false, broken.join("; "))
        }
    };
    [
        verdict(
            "resources/pids",
            pids,
            "hold their manifest's process ceiling as RLIMIT_NPROC",
        ),
        verdict(
            "resources/memory",
            memory,
            "are in a cgroup limited to their manifest's memory ceiling",
        ),
    ]
}

/// The process's `Max processes` soft and hard limits are both `want`.
fn process_ceiling(p: &RoleProcess, want: u32) -> Result<(), String> {
    let path = format!("/proc/{}/limits", p.pid);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let found: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("Max processes"))
        .ok_or_else(|| format!("{path}: no `Max processes` line"))?
        .split_whitespace()
        .take(2)
        .collect();
    let want = want.to_string();
    if found == [want.as_str(), want.as_str()] {
        Ok(())
    } else {
        Err(format!(
            "process limit {} (soft, hard), want {want}",
            found.join(", ")
        ))
    }
}

/// The memory limit of the process's cgroup is `want` bytes.
fn memory_ceiling(p: &RoleProcess, want: u64) -> Result<(), String> {
    let path = format!("/proc/{}/cgroup", p.pid);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let file = limit_file(&text).ok_or_else(|| format!("{path}: in no memory cgroup"))?;
    let found = std::fs::read_to_string(&file)
        .map_err(|e| format!("no memory ceiling ({}: {e})", file.display()))?;
    let found = found.trim();
    if found.parse::<u64>().ok() == Some(want) {
        Ok(())
    } else {
        Err(format!(
            "no memory ceiling of {} MiB: {} reads {found}",
            want >> 20,
            file.display()
        ))
    }
}

/// The limit file of the memory cgroup named in a `/proc/<pid>/cgroup` text: the v1 memory
/// controller's hierarchy where it has one, else the v2 (unified) one.
fn limit_file(proc_cgroup: &str) -> Option<PathBuf> {
    let mut unified = None;
    for line in proc_cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let path = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "memory") {
            return Some(
                PathBuf::from(CGROUP_ROOT)
                    .join("memory")
                    .join(path)
                    .join("memory.limit_in_bytes"),
            );
        }
        if controllers.is_empty() {
            unified = Some(PathBuf::from(CGROUP_ROOT).join(path).join("memory.max"));
        }
    }
    unified
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_controllers_hierarchy_is_read_where_it_is() {
        // Pure v2.
        assert_eq!(
            limit_file("0::/user.slice/libpod-abc.scope\n"),
            Some(PathBuf::from(
                "/sys/fs/cgroup/user.slice/libpod-abc.scope/memory.max"
            ))
        );
        // Hybrid: the memory controller is on v1, whatever the unified line says.
        assert_eq!(
            limit_file("12:pids:/x\n5:memory:/user.slice\n0::/user.slice/s.scope\n"),
            Some(PathBuf::from(
                "/sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes"
            ))
        );
        assert_eq!(
            limit_file("4:cpu,memory:/\n"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
        );
        assert_eq!(limit_file("3:pids:/x\n"), None);
    }

    /// A `sleep` the test owns, killed on drop.
    struct Sleeper(std::process::Child);

    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn role_process(child: &std::process::Child) -> RoleProcess {
        RoleProcess {
            role: "ward".into(),
            pid: child.id(),
            configured_env: None,
            log_command: None,
        }
    }

    #[test]
    fn a_process_ceiling_is_read_from_the_kernel() {
        let held = Sleeper(
            std::process::Command::new("prlimit")
                .args(["--nproc=32:32", "sleep", "30"])
                .spawn()
                .expect("prlimit (util-linux)"),
        );
        // prlimit sets the limit, then execs sleep in the same process.
        let p = role_process(&held.0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while process_ceiling(&p, 32).is_err() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(process_ceiling(&p, 32), Ok(()));
        let other = process_ceiling(&p, 64).unwrap_err();
        assert_eq!(other, "process limit 32, 32 (soft, hard), want 64");
    }

    /// A memory cgroup of the test's own, removed on drop (its process killed first).
    struct Group(PathBuf);

    impl Drop for Group {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }

    #[test]
    fn a_memory_ceiling_is_the_limit_of_the_processs_cgroup() {
        // Where the memory controller lives on this host (v1 on a hybrid host, else v2).
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let v1 = own.lines().any(|l| {
            l.split(':')
                .nth(1)
                .is_some_and(|c| c.split(',').any(|c| c == "memory"))
        });
        let (dir, limit_name) = if v1 {
            (
                PathBuf::from(CGROUP_ROOT).join("memory"),
                "memory.limit_in_bytes",
            )
        } else {
            (PathBuf::from(CGROUP_ROOT), "memory.max")
        };
        let group = Group(dir.join(format!("reach-ceiling-test-{}", std::process::id())));
        std::fs::create_dir(&group.0).expect("a memory cgroup of the test's own (root)");
        std::fs::write(group.0.join(limit_name), (64u64 << 20).to_string()).unwrap();
        let sleeper = Sleeper(
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap(),
        );
        let p = role_process(&sleeper.0);
        // Outside the group: whatever its cgroup allows is not 64 MiB.
        assert!(
            memory_ceiling(&p, 64 << 20)
                .unwrap_err()
                .starts_with("no memory ceiling of 64 MiB"),
        );
        std::fs::write(group.0.join("cgroup.procs"), p.pid.to_string()).unwrap();
        assert_eq!(memory_ceiling(&p, 64 << 20), Ok(()));
        let other = memory_ceiling(&p, 128 << 20).unwrap_err();
        assert!(
            other.ends_with(&format!("reads {}", 64u64 << 20)),
            "{other}"
        );
        drop(sleeper);
    }
}
