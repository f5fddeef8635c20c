_base_ = './fpn_posmlp-t_8xb2-40k_ade20k-512x512.py'
pretrained = 'checkpoints/posmlp-s_in1k_mmposmlp.pth'
model = dict(backbone=dict(arch='small', init_cfg=dict(checkpoint=pretrained)),
             neck=dict(in_channels=[128, 256, 512, 1024]))
