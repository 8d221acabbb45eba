//! reach-vm: the substrate of the vm-broker role (issue #8).
