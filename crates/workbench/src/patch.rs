//! Patch policy at the owner: the stamped patch applied to the real file in the guest.
//!
//! The compiler checked the patch against the pack's baseline; here the same
//! [`reach_plan::PatchPolicy::apply`] runs again on the bytes the guest holds, in this
//! order, and the first failure refuses with nothing written:
//! 1. the target is one of the policy's files (else `workbench/patch-outside-policy`);
//! 2. the real file is a regular file with the policy's owner and mode (same code);
//! 3. its digest is the pre-image the plan was compiled against (else
//!    `workbench/pre-image-drifted`: like a stale saved plan, the plan no longer describes
//!    this file);
//! 4. the policy admits every edit on the real text (every added line's shape, no forbidden
//!    substring, the resulting size; else `workbench/patch-outside-policy`);
//! 5. the result is the stamped post-image (else `workbench/post-image-mismatch`).
//!
//! Then one atomic write (temporary file, owner, mode, rename) and a read-back by digest and
//! by owner and mode (`workbench/write-not-confirmed`).

use reach_digest::Sha256Digest;
use reach_plan::PatchPolicy;
use reach_plan::candidate::{Edit, RelativeTarget};

use crate::Refusal;
use crate::guest::Guest;

/// What a confirmed patch did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PatchReport {
    pub target: String,
    pub pre_digest: Sha256Digest,
    pub post_digest: Sha256Digest,
    pub bytes: u64,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    pub diff: String,
}

/// The guest path of a relative target: the prepared system's root is `/`.
pub fn guest_path(target: &RelativeTarget) -> String {
    format!("/{}", target.as_str())
}

/// Applies a stamped patch to the real file (see the module's order of checks).
pub async fn apply<G: Guest>(
    guest: &G,
    policy: &PatchPolicy,
    target: &RelativeTarget,
    pre_digest: &Sha256Digest,
    post_digest: &Sha256Digest,
    edits: &[Edit],
) -> Result<PatchReport, Refusal> {
    let outside = |reason: String| Refusal::PatchOutsidePolicy { reason };
    let name = target.as_str();
    let file = policy
        .file(name)
        .ok_or_else(|| outside(format!("{name} is not a file the patch policy admits")))?;
    let path = guest_path(target);
    let stat = guest.stat_file(&path).await?;
    if !stat.regular || (stat.uid, stat.gid, stat.mode) != (file.uid, file.gid, file.mode) {
        return Err(outside(format!(
            "{name} in the guest is {} {}:{} {:04o}; the policy admits a regular file {}:{} {}",
            if stat.regular {
                "a regular file"
            } else {
                "not a regular file"
            },
            stat.uid,
            stat.gid,
            stat.mode,
            file.uid,
            file.gid,
            file.mode_text()
        )));
    }
    let real = guest.read_file(&path).await?;
    let found = Sha256Digest::of(&real);
    if found != *pre_digest {
        return Err(Refusal::PreImageDrifted {
            target: name.to_owned(),
            expected: *pre_digest,
            found,
        });
    }
    let text = String::from_utf8(real)
        .map_err(|_| outside(format!("{name} in the guest is not UTF-8 text")))?;
    let outcome = policy
        .apply(target, &text, edits)
        .map_err(|e| outside(e.to_string()))?;
    if outcome.post_digest != *post_digest {
        return Err(Refusal::PostImageMismatch {
            target: name.to_owned(),
            expected: *post_digest,
            found: outcome.post_digest,
        });
    }
    let back = guest
        .write_file(
            &path,
            outcome.post_image.as_bytes(),
            file.mode,
            file.uid,
            file.gid,
        )
        .await?;
    let after = guest.stat_file(&path).await?;
    if back != outcome.post_digest
        || (after.uid, after.gid, after.mode) != (file.uid, file.gid, file.mode)
    {
        return Err(Refusal::WriteNotConfirmed {
            target: name.to_owned(),
            expected: outcome.post_digest,
            found: back,
        });
    }
    Ok(PatchReport {
        target: name.to_owned(),
        pre_digest: found,
        post_digest: back,
        bytes: after.size,
        uid: after.uid,
        gid: after.gid,
        mode: after.mode,
        diff: outcome.diff,
    })
}
