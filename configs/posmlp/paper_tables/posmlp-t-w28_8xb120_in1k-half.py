# PosMLP Table 5 (window 28x28 in the first stage; 20.8M, 5.95G, 77.81 top-1): PosMLP-T,
# stages 2-4 keep (14, 14, 7).
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(window_sizes=[28, 14, 14, 7]))
