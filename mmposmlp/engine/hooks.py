"""Small hooks for checking distributed runs."""
import os.path as osp

import torch
from mmengine.hooks import Hook

from mmposmlp.registry import HOOKS


@HOOKS.register_module()
class SaveRankWeightsHook(Hook):
    """After training, every rank writes its own weights to ``work_dir/rank{r}_final.pth``.

    Used to verify that all DDP ranks end with identical weights
    (``custom_hooks = [dict(type='mmposmlp.SaveRankWeightsHook')]``).
    """
    priority = 'LOWEST'

    def after_run(self, runner) -> None:
        from mmengine.dist import get_rank
        from mmengine.model import is_model_wrapper
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        params = {k: v.detach().cpu().clone() for k, v in model.named_parameters()}
        buffers = {k: v.detach().cpu().clone() for k, v in model.named_buffers()}
        # buffers (BN running stats) may differ between ranks: mmengine's DDP uses broadcast_buffers=False
        torch.save({'params': params, 'buffers': buffers},
                   osp.join(runner.work_dir, f'rank{get_rank()}_final.pth'))
