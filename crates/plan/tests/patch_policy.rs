//! `sensorium-patch-policy.v1`: parsing, and applying a patch with its diff.

use expect_test::{Expect, expect};
use reach_plan::testing::{APP_CONF, POLICY};
use reach_plan::{Edit, Line, PatchPolicy, PatchRefusal, RelativeTarget};

fn target(t: &str) -> RelativeTarget {
    RelativeTarget::new(t).unwrap()
}

fn line(l: &str) -> Line {
    Line::new(l).unwrap()
}

fn replace(l: &str, w: &str) -> Edit {
    Edit::Replace {
        line: line(l),
        with: line(w),
    }
}

fn append(w: &str) -> Edit {
    Edit::Append { with: line(w) }
}

fn delete(l: &str) -> Edit {
    Edit::Delete { line: line(l) }
}

const FILE: &str = r#"
[[files]]
target = "etc/a.conf"
max_bytes = 100
uid = 0
gid = 0
mode = "0644"
line_shapes = ['^[a-z]+ = [a-z0-9]+$']
"#;

fn policy(extra: &str) -> String {
    format!("format = \"sensorium-patch-policy.v1\"\n{extra}")
}

#[test]
fn the_test_policy_parses() {
    let p = PatchPolicy::parse(POLICY).unwrap();
    let targets: Vec<_> = p.targets().map(RelativeTarget::as_str).collect();
    assert_eq!(
        targets,
        [
            "etc/app.conf",
            "etc/app.d/absent.conf",
            "etc/app.d/limits.conf"
        ]
    );
    let limits = p.file("etc/app.d/limits.conf").unwrap();
    assert_eq!((limits.uid, limits.gid, limits.mode), (0, 0, 0o640));
    assert_eq!(limits.mode_text(), "0640");
    assert_eq!(limits.max_bytes, 256);
    assert_eq!(limits.line_shapes[0].source(), "^max_[a-z]+ = [0-9]{1,6}$");
    assert_eq!(p.forbidden(), ["*", "0.0.0.0/0", "::/0"]);
}

#[test]
fn refused_policies() {
    let cases = [
        ("not TOML", "format = ".to_owned()),
        (
            "another format",
            FILE.replace("[[files]]", "format = \"v2\"\n[[files]]"),
        ),
        (
            "an unknown top-level key",
            policy(&format!("allow_all = true\n{FILE}")),
        ),
        (
            "an unknown file key",
            policy(&FILE.replace("uid = 0", "uid = 0\nowner = \"root\"")),
        ),
        (
            "a missing file key",
            policy(&FILE.replace("max_bytes = 100\n", "")),
        ),
        (
            "an absolute target",
            policy(&FILE.replace("etc/a.conf", "/etc/a.conf")),
        ),
        (
            "a parent target",
            policy(&FILE.replace("etc/a.conf", "etc/../a.conf")),
        ),
        (
            "a shape that does not compile",
            policy(&FILE.replace("[a-z0-9]+$", "[a-z0-9+$")),
        ),
        (
            "a mode that is not octal",
            policy(&FILE.replace("0644", "0648")),
        ),
        (
            "a mode as a number",
            policy(&FILE.replace("\"0644\"", "644")),
        ),
        ("a duplicate target", policy(&format!("{FILE}{FILE}"))),
        (
            "an empty forbidden substring",
            policy(&format!("forbidden = [\"*\", \"\"]\n{FILE}")),
        ),
        (
            "a negative uid",
            policy(&FILE.replace("uid = 0", "uid = -1")),
        ),
    ];
    let mut out = String::new();
    for (name, text) in cases {
        let line = match PatchPolicy::parse(&text) {
            Ok(_) => "admitted".to_owned(),
            Err(e) => format!("{}: {e}", e.code()),
        };
        out.push_str(&format!("{name}: {}\n", line.replace('\n', " ")));
    }
    expect![[r#"
        not TOML: package/schema: patch policy is not TOML: TOML parse error at line 1, column 10   | 1 | format =    |          ^ string values must be quoted, expected literal string 
        another format: package/schema: patch policy refused at `format`: expected `sensorium-patch-policy.v1`
        an unknown top-level key: package/schema: patch policy refused at `allow_all`: unknown field `allow_all`, expected one of `format`, `forbidden`, `files`
        an unknown file key: package/schema: patch policy refused at `files[0].owner`: unknown field `owner`, expected one of `target`, `max_bytes`, `uid`, `gid`, `mode`, `line_shapes`
        a missing file key: package/schema: patch policy refused at `files[0]`: missing field `max_bytes`
        an absolute target: package/schema: patch policy refused at `files[0].target`: a target must be relative, not start with `/`
        a parent target: package/schema: patch policy refused at `files[0].target`: a target must not have a `.` or `..` component
        a shape that does not compile: package/schema: patch policy refused at `files[0].line_shapes[0]`: line shape does not compile: regex parse error:     ^(?:^[a-z]+ = [a-z0-9+$)$                   ^ error: unclosed character class
        a mode that is not octal: package/schema: patch policy refused at `files[0].mode`: expected an octal mode of 3 or 4 digits, e.g. `0644`
        a mode as a number: package/schema: patch policy refused at `files[0].mode`: invalid type: integer `644`, expected a string
        a duplicate target: package/schema: patch policy refused at `files[1].target`: `etc/a.conf` is already admitted by an earlier entry
        an empty forbidden substring: package/schema: patch policy refused at `forbidden[1]`: an empty forbidden substring would refuse every line
        a negative uid: package/schema: patch policy refused at `files[0].uid`: invalid value: integer `-1`, expected u32
    "#]].assert_eq(&out);
}

fn check_apply(pre: &str, edits: &[Edit], expect: Expect) {
    let p = PatchPolicy::parse(POLICY).unwrap();
    let out = match p.apply(&target("etc/app.conf"), pre, edits) {
        Ok(o) => format!("{}=== post-image\n{}", o.diff, o.post_image),
        Err(e) => format!("{}: {e}\n", e.code()),
    };
    expect.assert_eq(&out);
}

#[test]
fn replace_append_delete() {
    check_apply(
        APP_CONF,
        &[
            replace("accept = localhost", "accept = localhost, example.test"),
            append("# accept example.test"),
            delete("log = info"),
        ],
        expect![[r#"
            --- a/etc/app.conf
            +++ b/etc/app.conf
            @@ -1,4 +1,4 @@
             # app configuration
             listen = 127.0.0.1
            -accept = localhost
            -log = info
            +accept = localhost, example.test
            +# accept example.test
            === post-image
            # app configuration
            listen = 127.0.0.1
            accept = localhost, example.test
            # accept example.test
        "#]],
    );
}

#[test]
fn an_edit_may_address_a_line_an_earlier_edit_added() {
    check_apply(
        APP_CONF,
        &[
            append("# first"),
            replace("# first", "# second"),
            append("# third"),
            delete("# third"),
        ],
        expect![[r#"
            --- a/etc/app.conf
            +++ b/etc/app.conf
            @@ -2,3 +2,4 @@
             listen = 127.0.0.1
             accept = localhost
             log = info
            +# second
            === post-image
            # app configuration
            listen = 127.0.0.1
            accept = localhost
            log = info
            # second
        "#]],
    );
}

#[test]
fn hunks_are_separated_by_context() {
    let pre: String = (0..20).map(|i| format!("# line {i}\n")).collect();
    check_apply(
        &pre,
        &[
            replace("# line 1", "# line one"),
            delete("# line 12"),
            append("# line twenty"),
        ],
        expect![[r#"
            --- a/etc/app.conf
            +++ b/etc/app.conf
            @@ -1,5 +1,5 @@
             # line 0
            -# line 1
            +# line one
             # line 2
             # line 3
             # line 4
            @@ -10,7 +10,6 @@
             # line 9
             # line 10
             # line 11
            -# line 12
             # line 13
             # line 14
             # line 15
            @@ -18,3 +17,4 @@
             # line 17
             # line 18
             # line 19
            +# line twenty
            === post-image
            # line 0
            # line one
            # line 2
            # line 3
            # line 4
            # line 5
            # line 6
            # line 7
            # line 8
            # line 9
            # line 10
            # line 11
            # line 13
            # line 14
            # line 15
            # line 16
            # line 17
            # line 18
            # line 19
            # line twenty
        "#]],
    );
}

#[test]
fn a_missing_final_newline_stays_missing() {
    check_apply(
        "accept = localhost",
        &[append("# more")],
        expect![[r#"
            --- a/etc/app.conf
            +++ b/etc/app.conf
            @@ -1,1 +1,2 @@
             accept = localhost
            +# more
            === post-image
            accept = localhost
            # more"#]],
    );
    check_apply(
        "",
        &[append("# first")],
        expect![[r#"
        --- a/etc/app.conf
        +++ b/etc/app.conf
        @@ -0,0 +1,1 @@
        +# first
        === post-image
        # first
    "#]],
    );
}

#[test]
fn a_line_present_twice_is_not_addressable() {
    check_apply(
        "# x\n# x\naccept = a\n",
        &[delete("# x")],
        expect![[r#"
            workbench/patch-outside-policy: edit 0: the line `# x` occurs 2 times in `etc/app.conf`, not exactly once
        "#]],
    );
}

#[test]
fn line_shapes_are_anchored() {
    let p = PatchPolicy::parse(&policy(
        &FILE.replace("'^[a-z]+ = [a-z0-9]+$'", "'a|b = c'"),
    ))
    .unwrap();
    let t = target("etc/a.conf");
    assert!(p.apply(&t, "", &[append("a")]).is_ok());
    assert!(p.apply(&t, "", &[append("b = c")]).is_ok());
    for smuggled in ["a = relay", "xa", "b = c!", "ab = c"] {
        assert!(
            matches!(
                p.apply(&t, "", &[append(smuggled)]),
                Err(PatchRefusal::ShapeMismatch { .. })
            ),
            "{smuggled}"
        );
    }
}

#[test]
fn outcome_digests_are_of_the_images() {
    let p = PatchPolicy::parse(POLICY).unwrap();
    let o = p
        .apply(&target("etc/app.conf"), APP_CONF, &[append("# x")])
        .unwrap();
    assert_eq!(o.pre_digest, reach_digest::Sha256Digest::of(APP_CONF));
    assert_eq!(o.post_digest, reach_digest::Sha256Digest::of(&o.post_image));
    assert_eq!(o.post_image, format!("{APP_CONF}# x\n"));
}
