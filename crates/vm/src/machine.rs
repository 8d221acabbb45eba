//! The one QEMU machine definition, shared by instance boots, prepared-system captures and
//! restores.
//!
//! A restore loads a migration stream into a freshly started QEMU, which works only when the
//! destination's devices are exactly the source's: same versioned machine type, same devices
//! in the same order, same memory and CPUs, same kernel and option ROMs. So every QEMU the
//! crate starts is described by a [`Machine`] and turned into arguments here, nowhere else.
//!
//! Disks are a chain of block nodes given explicitly (`-blockdev … backing=…`), so a layer's
//! bytes never depend on where its backing file lives: the path stored in a qcow2 header is
//! never consulted.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::probe::Accel;

/// The versioned machine type: a migration stream is only loadable into the same one, and
/// the unversioned `pc` alias moves with QEMU releases.
pub const MACHINE_TYPE: &str = "pc-i440fx-7.2";

/// The disk chain: the pinned read-only rootfs, optionally a pinned read-only prepared-system
/// layer, and the instance's own writable qcow2 overlay on top.
#[derive(Debug, Clone)]
pub struct Disks {
    pub base_raw: PathBuf,
    pub prepared: Option<PathBuf>,
    pub top: PathBuf,
    /// Ignore the guest's flushes on the top layer: an instance overlay is thrown away, so
    /// durability buys nothing (a prepared-system capture keeps flushes).
    pub throwaway: bool,
    /// A second disk, read-only raw, after the root disk (`/dev/vdb`, serial
    /// [`DATA_DISK_SERIAL`]): what a deployment guest installs from. Instances and prepared
    /// systems have none, so their device list (and a migration stream) is unchanged.
    pub data: Option<PathBuf>,
}

/// The serial of [`Disks::data`]: the guest finds it as `/dev/disk/by-id/virtio-reach-data`.
pub const DATA_DISK_SERIAL: &str = "reach-data";

/// Everything a QEMU invocation depends on.
#[derive(Debug, Clone)]
pub struct Machine<'a> {
    pub accel: Accel,
    pub memory_mib: u32,
    pub cpus: u32,
    pub kernel: &'a Path,
    pub initrd: &'a Path,
    pub cmdline: &'a str,
    pub disks: Disks,
    /// The guest agent's virtio-serial port name.
    pub agent_channel: &'a str,
    /// Sockets, console log and pidfile live here; QEMU's command line names it, which is
    /// how a process is recognized as this instance's (see `host::is_ours`).
    pub dir: &'a Path,
    pub qmp_sock: &'a Path,
    pub qga_sock: &'a Path,
    pub console: &'a Path,
    pub pidfile: &'a Path,
    /// A migration stream to load instead of booting.
    pub incoming: Option<&'a Path>,
    pub daemonize: bool,
    pub name: &'a str,
}

/// Quotes a path for the `sh -c` QEMU runs an `exec:` migration URI with.
pub fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

impl Machine<'_> {
    pub fn args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |s: String| a.push(s.into());
        for s in [
            "-nodefaults",
            "-no-user-config",
            "-M",
            MACHINE_TYPE,
            "-accel",
            self.accel.qemu_arg(),
        ] {
            push(s.to_owned());
        }
        push("-m".into());
        push(self.memory_mib.to_string());
        push("-smp".into());
        push(self.cpus.to_string());
        // No network device at all: the runtime network ceiling is none.
        for s in ["-nic", "none", "-display", "none"] {
            push(s.to_owned());
        }
        if self.daemonize {
            push("-daemonize".into());
        }
        push("-name".into());
        push(self.name.to_owned());
        push("-serial".into());
        push(format!("file:{}", self.console.display()));
        push("-kernel".into());
        push(self.kernel.display().to_string());
        push("-initrd".into());
        push(self.initrd.display().to_string());
        push("-append".into());
        push(self.cmdline.to_owned());
        push("-blockdev".into());
        push(format!(
            "driver=raw,node-name=base,read-only=on,file.driver=file,file.filename={}",
            self.disks.base_raw.display()
        ));
        let mut below = "base";
        if let Some(p) = &self.disks.prepared {
            push("-blockdev".into());
            push(format!(
                "driver=qcow2,node-name=prepared,read-only=on,backing=base,file.driver=file,file.filename={}",
                p.display()
            ));
            below = "prepared";
        }
        push("-blockdev".into());
        push(format!(
            "driver=qcow2,node-name=top,backing={below},cache.no-flush={},file.driver=file,file.filename={}",
            if self.disks.throwaway { "on" } else { "off" },
            self.disks.top.display()
        ));
        push("-device".into());
        push("virtio-blk-pci,drive=top".into());
        if let Some(p) = &self.disks.data {
            push("-blockdev".into());
            push(format!(
                "driver=raw,node-name=data,read-only=on,file.driver=file,file.filename={}",
                p.display()
            ));
            push("-device".into());
            push(format!(
                "virtio-blk-pci,drive=data,serial={DATA_DISK_SERIAL}"
            ));
        }
        push("-qmp".into());
        push(format!(
            "unix:{},server=on,wait=off",
            self.qmp_sock.display()
        ));
        push("-chardev".into());
        push(format!(
            "socket,id=qga0,path={},server=on,wait=off",
            self.qga_sock.display()
        ));
        push("-device".into());
        push("virtio-serial-pci".into());
        push("-device".into());
        push(format!(
            "virtserialport,chardev=qga0,name={}",
            self.agent_channel
        ));
        push("-pidfile".into());
        push(self.pidfile.display().to_string());
        if let Some(state) = self.incoming {
            push("-incoming".into());
            push(format!("exec:cat {}", sh_quote(state)));
        }
        debug_assert!(self.qmp_sock.starts_with(self.dir));
        a
    }
}

/// The version line of a QEMU binary (`QEMU emulator version 7.2.22 (…)`): a migration
/// stream is pinned to the QEMU that wrote it.
pub async fn qemu_version(qemu: &Path) -> Result<String, std::io::Error> {
    let out = tokio::process::Command::new(qemu)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .await?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .next()
        .map(|l| l.trim().to_owned())
        .filter(|l| out.status.success() && !l.is_empty())
        .ok_or_else(|| std::io::Error::other(format!("{} --version said nothing", qemu.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The arguments of a test machine in `/run/i/abc` with `disks`, loading `incoming`.
    fn args_of(disks: Disks, incoming: Option<&Path>) -> Vec<String> {
        let dir = Path::new("/run/i/abc");
        let (qmp, qga, console, pidfile) = (
            dir.join("qmp.sock"),
            dir.join("qga.sock"),
            dir.join("console.log"),
            dir.join("qemu.pid"),
        );
        Machine {
            accel: Accel::Tcg,
            memory_mib: 384,
            cpus: 1,
            kernel: Path::new("/img/vmlinuz"),
            initrd: Path::new("/img/initrd.img"),
            cmdline: "console=ttyS0",
            disks,
            agent_channel: "org.qemu.guest_agent.0",
            dir,
            qmp_sock: &qmp,
            qga_sock: &qga,
            console: &console,
            pidfile: &pidfile,
            incoming,
            daemonize: true,
            name: "reach-vm-abc",
        }
        .args()
        .into_iter()
        .map(|s| s.into_string().unwrap())
        .collect()
    }

    #[test]
    fn the_chain_and_the_incoming_stream_are_explicit() {
        let args = args_of(
            Disks {
                base_raw: "/img/rootfs.raw".into(),
                prepared: Some("/prep/disk.qcow2".into()),
                top: "/run/i/abc/overlay.qcow2".into(),
                throwaway: true,
                data: None,
            },
            Some(Path::new("/prep/it's.mig")),
        );
        let joined = args.join(" ");
        assert!(joined.contains("-M pc-i440fx-7.2"), "{joined}");
        assert!(joined.contains("-nic none"), "{joined}");
        assert!(
            joined.contains("node-name=prepared,read-only=on,backing=base"),
            "{joined}"
        );
        assert!(
            joined.contains("node-name=top,backing=prepared,cache.no-flush=on"),
            "{joined}"
        );
        assert_eq!(args.last().unwrap(), r"exec:cat '/prep/it'\''s.mig'");
        assert!(!args.iter().any(|a| a.starts_with("-netdev") || a == "-net"));
        assert!(!joined.contains("node-name=data"), "{joined}");
    }

    #[test]
    fn a_data_disk_is_read_only_and_after_the_root_disk() {
        let joined = args_of(
            Disks {
                base_raw: "/img/rootfs.raw".into(),
                prepared: None,
                top: "/run/i/abc/overlay.qcow2".into(),
                throwaway: false,
                data: Some("/bundle/data.ext4".into()),
            },
            None,
        );
        let top = joined.iter().position(|a| a == "virtio-blk-pci,drive=top");
        let data = joined
            .iter()
            .position(|a| a == "virtio-blk-pci,drive=data,serial=reach-data");
        assert!(top.is_some() && data.is_some() && top < data, "{joined:?}");
        assert!(joined.iter().any(|a| a
            == "driver=raw,node-name=data,read-only=on,file.driver=file,file.filename=/bundle/data.ext4"));
    }
}
