"""Partition: ATen graph -> FusionPlan (legality separate from the policy that decides)."""
from brrr_compiler.partition.partitioner import group_of_members, partition
from brrr_compiler.partition.plan import Decision, FusionPlan, Group, MeasuredChoice
from brrr_compiler.partition.policy import (FusionPolicy, GreedyPolicy, MergeCandidate,
                                            NoFusionPolicy, PolicyError, Verdict)

__all__ = ["partition", "group_of_members", "Decision", "FusionPlan", "Group",
           "MeasuredChoice", "FusionPolicy", "GreedyPolicy", "MergeCandidate",
           "NoFusionPolicy", "PolicyError", "Verdict"]
