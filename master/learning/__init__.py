"""What running attempts teach the master: the learner, who shares a job's GPUs, and handing
observations to the interference model between scheduling passes."""

from master.learning.learner import Learner

__all__ = ["Learner"]
