# PosMLP-B: the same recipe as PosMLP-T (paper Sec. 5.2). No official code or weights exist
# for B; dims 192/384/768/1536 follow "C = 96, 128, 192" (Sec. 4.2) and give the paper's 82M.
_base_ = './posmlp-t_8xb120_in1k.py'
model = dict(backbone=dict(arch='base'), head=dict(in_channels=1536))
