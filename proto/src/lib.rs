//! Generated gRPC types for every Reach port.
//!
//! **Architecture Invariant:** protobuf types stay at the gRPC adapters. Domain crates use plain
//! Rust types and convert by hand at the edge, so a wire change never leaks into domain logic.
#![allow(missing_debug_implementations, clippy::all, clippy::pedantic)]

pub mod health {
    pub mod v1 {
        tonic::include_proto!("reach.health.v1");
    }
}

pub mod core {
    pub mod v1 {
        tonic::include_proto!("reach.core.v1");
    }
}

pub mod ward {
    pub mod v1 {
        tonic::include_proto!("reach.ward.v1");
    }
}

pub mod egress {
    pub mod v1 {
        tonic::include_proto!("reach.egress.v1");
    }
}

pub mod corpus {
    pub mod v1 {
        tonic::include_proto!("reach.corpus.v1");
    }
}

pub mod vm {
    pub mod v1 {
        tonic::include_proto!("reach.vm.v1");
    }
}

pub mod workbench {
    pub mod v1 {
        tonic::include_proto!("reach.workbench.v1");
    }
}

include!(concat!(env!("OUT_DIR"), "/methods.rs"));

/// The methods of `service` (full name, e.g. `reach.core.v1.Admission`), if it exists.
pub fn methods_of(service: &str) -> Option<&'static [&'static str]> {
    SERVICES
        .iter()
        .find(|(s, _)| *s == service)
        .map(|(_, m)| *m)
}
