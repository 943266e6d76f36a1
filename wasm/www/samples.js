// Sample logs for the page's "Sample" buttons. Written for torchdx (shaped like real
// PyTorch output), not taken from anyone's run.
export const SAMPLES = {
  "device-mismatch.log": String.raw`Epoch 1/10
  batch    0/469  loss 2.3026
Traceback (most recent call last):
  File "/home/user/project/train.py", line 61, in <module>
    main()
  File "/home/user/project/train.py", line 54, in main
    train_one_epoch(model, loader, optimizer, loss_fn, device)
  File "/home/user/project/train.py", line 42, in train_one_epoch
    loss = loss_fn(out, labels)
           ^^^^^^^^^^^^^^^^^^^^
  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1787, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1798, in _call_impl
    return forward_call(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/loss.py", line 1385, in forward
    return F.cross_entropy(
           ^^^^^^^^^^^^^^^^
  File "/opt/venv/lib/python3.11/site-packages/torch/nn/functional.py", line 3458, in cross_entropy
    return torch._C._nn.cross_entropy_loss(
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! (when checking argument for argument target in method wrapper_CUDA_nll_loss_forward)
`,
  "two-ranks.log": String.raw`[rank0]:[W1129 10:15:05.871262 4431 ProcessGroupNCCL.cpp:4715] [PG ID 0 PG GUID 0 Rank 0]  using GPU 0 as device used by this process is currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect. You can pecify device_id in init_process_group() to force use of a particular device.
epoch 0 step 100 loss 1.9312
epoch 0 step 200 loss 1.7125
[rank1]: Traceback (most recent call last):
[rank1]:   File "/home/user/project/train_ddp.py", line 97, in <module>
[rank1]:     main()
[rank1]:   File "/home/user/project/train_ddp.py", line 74, in main
[rank1]:     logits = head(features)
[rank1]:              ^^^^^^^^^^^^^^
[rank1]:   File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1787, in _wrapped_call_impl
[rank1]:     return self._call_impl(*args, **kwargs)
[rank1]:            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
[rank1]:   File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1798, in _call_impl
[rank1]:     return forward_call(*args, **kwargs)
[rank1]:            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
[rank1]:   File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", line 134, in forward
[rank1]:     return F.linear(input, self.weight, self.bias)
[rank1]:            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
[rank1]: RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x2048 and 512x10)
[rank0]:[E1129 10:25:13.955028747 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2635, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600024 milliseconds before timing out.
[rank0]:[E1129 10:25:13.957372583 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: 2635 PG status: last enqueued work: 2635, last completed work: 2634
[rank0]:[E1129 10:25:13.957401221 ProcessGroupNCCL.cpp:667] Stack trace of the failed collective not found, potentially because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.
[rank0]:[E1129 10:25:13.957412870 ProcessGroupNCCL.cpp:681] [Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
[rank0]:[E1129 10:25:13.957418113 ProcessGroupNCCL.cpp:695] [Rank 0] To avoid data inconsistency, we are taking the entire process down.
`,
};
