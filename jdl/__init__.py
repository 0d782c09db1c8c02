"""CiGri's JSON JDL: schema validation, per-cluster resolution, parameter streaming."""

from cigri.jdl.parser import CampaignSpec, parse_jdl
from cigri.jdl.params import iter_params, split_param

__all__ = ["CampaignSpec", "parse_jdl", "iter_params", "split_param"]
