//! Validation: from the raw TOML form to a [`Manifest`] every rule holds for.

use std::collections::BTreeSet;

use reach_identity::{Principal, TrustDomain};

use crate::error::{ManifestError as E, ManifestErrorKind as K};
use crate::schema::*;

/// The source corpus-builder serves when nothing else is configured: the embedded project docs.
pub const DEFAULT_CORPUS: &str = "reach-docs";
/// The source corpus-builder serves instead with `settings.docs_dir` (`reach demo --docs DIR`).
pub const LOCAL_DOCS_CORPUS: &str = "local-docs";

/// The principal name of the operator CLI.
pub const OPERATOR: &str = "operator";
/// The gRPC service every role serves for the operator.
pub const HEALTH_SERVICE: &str = "reach.health.v1.Health";

/// A validated manifest. Roles are in start order.
#[derive(Clone, Debug)]
pub struct Manifest {
    pub profile: String,
    pub trust_domain: TrustDomain,
    pub habitat: Habitat,
    pub recovery: Recovery,
    pub destinations: Vec<Destination>,
    pub roles: Vec<Role>,
    /// Every port, the implicit `<role>.health` ports included.
    pub ports: Vec<Port>,
}

/// A validated role.
#[derive(Clone, Debug)]
pub struct Role {
    /// The role's index in the manifest file (`roles[index]`), for paths in refusals.
    pub index: usize,
    pub name: RoleName,
    pub kind: RoleKind,
    pub principal: Principal,
    pub binary: String,
    pub image: String,
    pub args: Vec<String>,
    pub after: Vec<RoleName>,
    pub network: NetworkClass,
    pub credentials: Vec<Credential>,
    pub limits: Limits,
    pub user_ns: String,
    pub mounts: Vec<Mount>,
    pub settings: toml::Table,
    /// Extra `podman run` arguments, vetted by Scribe.
    pub podman_args: Vec<String>,
    /// Non-secret environment, vetted by Scribe.
    pub environment: std::collections::BTreeMap<String, String>,
}

/// A validated port and its exact grants.
#[derive(Clone, Debug)]
pub struct Port {
    pub name: String,
    pub server: RoleName,
    pub service: String,
    pub grants: Vec<Grant>,
}

/// One (caller, method) pair the port table allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// A role name or `operator`.
    pub caller: String,
    /// The method name, e.g. `Admit`.
    pub method: String,
    pub reason: Option<String>,
}

impl Port {
    /// Full gRPC path of `method`, e.g. `/reach.core.v1.Admission/Admit`.
    pub fn path(&self, method: &str) -> String {
        format!("/{}/{method}", self.service)
    }
}

impl Manifest {
    pub fn role(&self, name: &str) -> Option<&Role> {
        self.roles.iter().find(|r| r.name.as_str() == name)
    }
    pub fn port(&self, name: &str) -> Option<&Port> {
        self.ports.iter().find(|p| p.name == name)
    }
    pub fn principal(&self, name: &str) -> Principal {
        Principal::new(self.trust_domain.clone(), name).expect("validated name")
    }
    /// Every principal of the deployment: each role and the operator.
    pub fn principals(&self) -> Vec<Principal> {
        let mut v: Vec<_> = self.roles.iter().map(|r| r.principal.clone()).collect();
        v.push(self.principal(OPERATOR));
        v
    }
}

/// The sources the manifest's corpus-builder provides: its default (the embedded docs, or
/// `local-docs` with `settings.docs_dir`) and the operator sources its `settings.sources`
/// declares (each added at run time with `reach corpus add NAME`). Empty without a
/// corpus-builder.
pub fn corpus_sources(roles: &[Role]) -> Vec<String> {
    let Some(builder) = roles.iter().find(|r| r.kind == RoleKind::CorpusBuilder) else {
        return Vec::new();
    };
    let default = if builder.settings.contains_key("docs_dir") {
        LOCAL_DOCS_CORPUS
    } else {
        DEFAULT_CORPUS
    };
    let mut out = vec![default.to_owned()];
    if let Some(toml::Value::Array(declared)) = builder.settings.get("sources") {
        out.extend(
            declared
                .iter()
                .filter_map(|v| v.as_str())
                .map(str::to_owned),
        );
    }
    out
}

/// `habitat.corpus` must name a source corpus-builder provides: a deployment answering from a
/// corpus nobody builds would otherwise start and serve "not in the docs" to every question.
fn check_corpus(habitat: &Habitat, roles: &[Role]) -> Result<(), E> {
    let known = corpus_sources(roles);
    if known.is_empty() || known.contains(&habitat.corpus) {
        return Ok(());
    }
    Err(E::new(
        "habitat.corpus",
        K::UnknownCorpus {
            corpus: habitat.corpus.clone(),
            known,
        },
    ))
}

pub(crate) fn validate(raw: RawManifest) -> Result<Manifest, E> {
    if raw.schema != SCHEMA {
        return Err(E::new("schema", K::UnsupportedSchema(raw.schema)));
    }
    let trust_domain = TrustDomain::new(&raw.trust_domain)
        .map_err(|e| E::new("trust_domain", K::BadName(e.to_string())))?;

    let mut destinations = BTreeSet::new();
    for (i, d) in raw.destinations.iter().enumerate() {
        if !destinations.insert(d.name.clone()) {
            return Err(E::new(
                format!("destinations[{i}].name"),
                K::Duplicate(d.name.clone()),
            ));
        }
    }

    // Roles: names, principals, kinds, network, credentials.
    let mut names = BTreeSet::new();
    let mut roles = Vec::new();
    for (i, r) in raw.roles.into_iter().enumerate() {
        let at = |f: &str| format!("roles[{i}].{f}");
        let principal = Principal::new(trust_domain.clone(), r.name.clone())
            .map_err(|e| E::new(at("name"), K::BadName(e.to_string())))?;
        if r.name == OPERATOR || !names.insert(r.name.clone()) {
            return Err(E::new(
                at("name"),
                K::DuplicatePrincipal(principal.to_string()),
            ));
        }
        let kind = RoleKind::from_binary(&r.binary).ok_or_else(|| {
            E::new(
                at("binary"),
                K::Dangling {
                    what: "role binary",
                    name: r.binary.clone(),
                },
            )
        })?;
        let network = NetworkClass::parse(&r.network).ok_or_else(|| {
            E::new(
                at("network"),
                K::Schema(format!(
                    "`{}` is not `none` or `egress:<destinations>`",
                    r.network
                )),
            )
        })?;
        if let NetworkClass::Egress(ds) = &network {
            if kind.must_be_offline() {
                return Err(E::new(at("network"), K::NetworkNotAllowed(r.name.clone())));
            }
            for d in ds {
                if !destinations.contains(d) {
                    return Err(E::new(
                        at("network"),
                        K::Dangling {
                            what: "destination",
                            name: d.clone(),
                        },
                    ));
                }
            }
        }
        for (j, c) in r.credentials.iter().enumerate() {
            let cat = format!("roles[{i}].credentials[{j}]");
            kind.may_hold(c.kind).map_err(|why| {
                E::new(
                    format!("{cat}.kind"),
                    K::ForbiddenCredential {
                        role: r.name.clone(),
                        kind: c.kind.as_str().to_owned(),
                        why,
                    },
                )
            })?;
            let plain = !c.file.is_empty()
                && !c.file.contains('/')
                && !c.file.starts_with('.')
                && ![
                    reach_identity::files::LEAF_CERT,
                    reach_identity::files::LEAF_KEY,
                    reach_identity::files::TRUST_BUNDLE,
                ]
                .contains(&c.file.as_str());
            if !plain {
                return Err(E::new(
                    format!("{cat}.file"),
                    K::BadSecretFile(c.file.clone()),
                ));
            }
        }
        roles.push((i, r, kind, principal, network));
    }

    // Ordering: references exist, no cycle; start order is a stable topological sort.
    for (i, r, ..) in &roles {
        for (j, a) in r.after.iter().enumerate() {
            if !names.contains(a) {
                return Err(E::new(
                    format!("roles[{i}].after[{j}]"),
                    K::Dangling {
                        what: "role",
                        name: a.clone(),
                    },
                ));
            }
        }
    }
    let mut ordered: Vec<Role> = Vec::new();
    let mut placed = BTreeSet::new();
    while ordered.len() < roles.len() {
        let next = roles.iter().position(|(_, r, ..)| {
            !placed.contains(&r.name) && r.after.iter().all(|a| placed.contains(a))
        });
        let Some(pos) = next else {
            let stuck = roles
                .iter()
                .find(|(_, r, ..)| !placed.contains(&r.name))
                .map(|(i, r, ..)| (*i, r.name.clone()));
            let (i, name) = stuck.unwrap_or_default();
            return Err(E::new(format!("roles[{i}].after"), K::OrderingCycle(name)));
        };
        let (index, r, kind, principal, network) = &roles[pos];
        placed.insert(r.name.clone());
        ordered.push(Role {
            index: *index,
            name: RoleName(r.name.clone()),
            kind: *kind,
            principal: principal.clone(),
            binary: r.binary.clone(),
            image: r.image.clone(),
            args: r.args.clone(),
            after: r.after.iter().cloned().map(RoleName).collect(),
            network: network.clone(),
            credentials: r.credentials.clone(),
            limits: r.limits.clone(),
            user_ns: r.user_ns.clone(),
            mounts: r.mounts.clone(),
            settings: r.settings.clone(),
            podman_args: r.podman_args.clone(),
            environment: r.environment.clone(),
        });
    }

    // Ports: the declared ones, then one health port per role for the operator.
    let mut ports: Vec<Port> = Vec::new();
    for (i, p) in raw.ports.into_iter().enumerate() {
        let at = |f: &str| format!("ports[{i}].{f}");
        if ports.iter().any(|q| q.name == p.name) {
            return Err(E::new(at("name"), K::Duplicate(p.name)));
        }
        if !names.contains(&p.server) {
            return Err(E::new(
                at("server"),
                K::Dangling {
                    what: "role",
                    name: p.server,
                },
            ));
        }
        if p.service == HEALTH_SERVICE {
            return Err(E::new(
                at("service"),
                K::Duplicate(format!("{HEALTH_SERVICE} is implicit on every role")),
            ));
        }
        let Some(methods) = reach_proto::methods_of(&p.service) else {
            return Err(E::new(
                at("service"),
                K::Dangling {
                    what: "service",
                    name: p.service,
                },
            ));
        };
        let mut grants = Vec::new();
        for (j, g) in p.allow.into_iter().enumerate() {
            let gat = |f: &str| format!("ports[{i}].allow[{j}].{f}");
            if g.caller != OPERATOR && !names.contains(&g.caller) {
                return Err(E::new(
                    gat("caller"),
                    K::Dangling {
                        what: "role",
                        name: g.caller,
                    },
                ));
            }
            if g.caller == p.server && g.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
                return Err(E::new(gat("reason"), K::SelfCallWithoutReason(g.caller)));
            }
            for (k, m) in g.methods.iter().enumerate() {
                if !methods.contains(&m.as_str()) {
                    return Err(E::new(
                        format!("ports[{i}].allow[{j}].methods[{k}]"),
                        K::Dangling {
                            what: "method",
                            name: format!("{}/{m}", p.service),
                        },
                    ));
                }
                let grant = Grant {
                    caller: g.caller.clone(),
                    method: m.clone(),
                    reason: g.reason.clone(),
                };
                if grants
                    .iter()
                    .any(|x: &Grant| x.caller == grant.caller && x.method == grant.method)
                {
                    return Err(E::new(
                        format!("ports[{i}].allow[{j}].methods[{k}]"),
                        K::Duplicate(format!("{} -> {m}", g.caller)),
                    ));
                }
                grants.push(grant);
            }
        }
        ports.push(Port {
            name: p.name,
            server: RoleName(p.server),
            service: p.service,
            grants,
        });
    }
    for r in &ordered {
        let name = format!("{}.health", r.name);
        if ports.iter().any(|p| p.name == name) {
            return Err(E::new("ports", K::Duplicate(name)));
        }
        ports.push(Port {
            name,
            server: r.name.clone(),
            service: HEALTH_SERVICE.to_owned(),
            grants: vec![Grant {
                caller: OPERATOR.to_owned(),
                method: "Check".to_owned(),
                reason: None,
            }],
        });
    }

    check_corpus(&raw.habitat, &ordered)?;

    Ok(Manifest {
        profile: raw.profile,
        trust_domain,
        habitat: raw.habitat,
        recovery: raw.recovery,
        destinations: raw.destinations,
        roles: ordered,
        ports,
    })
}
