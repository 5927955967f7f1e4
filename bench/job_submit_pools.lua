-- The pools routing of slurm-conf/testbed/pools.yaml written as a job_submit.lua, as a site
-- would without slurmbridge: the baseline bench/plugin-overhead.sh compares our plugin with.
-- CPU jobs go to cpu; GPU jobs to the pools of their type, spot first; a GPU job naming the
-- CPU pool is refused.
local pools_by_type = { a100 = "a100-spot,a100", v100 = "v100" }
local any_gpu = "a100-spot,a100,v100"

local function gpu_type(job_desc)
  for _, field in ipairs({ "tres_per_node", "tres_per_job", "tres_per_task", "tres_per_socket" }) do
    local v = job_desc[field]
    if v ~= nil then
      local typ = string.match(v, "gpu:([%a][%w_]*):%d")
      if typ ~= nil then return typ end
      if string.match(v, "gpu") then return "" end
    end
  end
  return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local typ = gpu_type(job_desc)
  if job_desc.partition ~= nil then
    if typ ~= nil and job_desc.partition == "cpu" then
      slurm.log_user("pool cpu has no GPUs; use -p " .. any_gpu)
      return slurm.ERROR
    end
    return slurm.SUCCESS
  end
  if typ == nil then
    job_desc.partition = "cpu"
  elseif typ == "" then
    job_desc.partition = any_gpu
  elseif pools_by_type[typ] ~= nil then
    job_desc.partition = pools_by_type[typ]
  else
    slurm.log_user("no pool has GPUs of type " .. typ)
    return slurm.ERROR
  end
  slurm.log_user("job sent to pools " .. job_desc.partition)
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
