# PosMLP-S: the same recipe as PosMLP-T (paper Sec. 5.2: all variants share it).
_base_ = './posmlp-t_8xb120_in1k.py'
model = dict(backbone=dict(arch='small'), head=dict(in_channels=1024))
