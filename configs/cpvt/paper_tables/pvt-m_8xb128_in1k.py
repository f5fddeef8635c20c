# PVT-medium on ImageNet-1k: the PVT v1 baseline of CPVT Table 13 (81.2 top-1, reported; the PVT paper's
# number). PVT v1 (Wang et al., ICCV 2021) = PVTPEG with a learnable position table per stage, the class
# token on stage 4 and no PEG (see pvt-t_8xb128_in1k.py); the official github.com/whai362/PVT pvt_medium.pth
# converts with tools/model_converters/pcpvt2mmposmlp.py.
# Recipe: PVT v1's own (its classification/configs/pvt/pvt_medium.py on the DeiT trainer): the
# ../pvt-peg-m-gap_8xb128_in1k.py recipe (AdamW lr 5e-4 x 1024/512, wd 0.05, 300 epochs) with drop path 0.3
# and grad clipping at 1.0; no weight decay on the class token (PVT v1's no_weight_decay), the position
# tables decayed.
_base_ = '../pvt-peg-m-gap_8xb128_in1k.py'

model = dict(
    backbone=dict(
        pos_embed_type='learnable',
        peg_after_block=None,
        with_cls_token=True,
        out_type='cls_token',
        drop_path_rate=0.3),
    neck=None)

optim_wrapper = dict(
    paramwise_cfg=dict(
        _delete_=True, norm_decay_mult=0.0, bias_decay_mult=0.0, custom_keys={'cls_token': dict(decay_mult=0.0)}),
    clip_grad=dict(max_norm=1.0))
