"""Partition: ATen graph -> FusionPlan (legality separate from the policy that decides)."""
from brrr_compiler.partition.partitioner import partition
from brrr_compiler.partition.plan import Decision, FusionPlan, Group
from brrr_compiler.partition.policy import (FusionPolicy, GreedyPolicy, MergeCandidate,
                                            NoFusionPolicy, Verdict)

__all__ = ["partition", "Decision", "FusionPlan", "Group", "FusionPolicy", "GreedyPolicy",
           "MergeCandidate", "NoFusionPolicy", "Verdict"]
