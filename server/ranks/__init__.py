"""Ranks: how the processes of one server find each other and stay in step.

  rendezvous   join(): rank 0 listens, the others connect -> Link (sockets)
  wire         frames on the host link, tagged by collective
  comm         Comm interface; HostComm (TCP, rank 0 a hub); NcclComm in nccl_comm
  fingerprint  every rank's settings, gathered and compared before the data plane runs
  steps        the packed int32 message rank 0 broadcasts every round
  follower     follow(): ranks > 0 apply rank 0's steps; send_step() is rank 0's half
  errors       RankLost, RankMismatch, FingerprintMismatch, JoinTimeout / JoinError
"""
