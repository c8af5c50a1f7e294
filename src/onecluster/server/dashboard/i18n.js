// English and Simplified Chinese.  Every label on the page comes from here; what the server
// writes (event messages, a job's reason, the scheduler's "why") is shown as it comes.

const WORDS = {
  en: {
    noc: "NOC", live_on: "live", live_retry: "reconnecting", live_off: "offline",
    sign_in_title: "Sign in to the NOC view",
    sign_in_help: "Paste a token: admin, team member, compliance or auditor.",
    sign_in: "Sign in", sign_out: "Sign out", bad_token: "That token is not valid here.",
    agent_token: "An agent token is for agents, not for people.",
    page_overview: "Overview", page_jobs: "Jobs", page_transfers: "Transfers",
    page_register: "Export register", page_events: "Events", page_report: "Monthly report",
    not_for_role: "Your role cannot see this.",
    map: "Sites and circuits", path_from: "Path from", path_to: "to",
    primary: "primary", backup: "backup", unreachable: "unreachable",
    state_up: "up", state_degraded: "degraded", state_down: "down", state_unknown: "unknown",
    state_pending: "pending", state_running: "running", state_preempting: "preempting",
    state_cancelling: "cancelling", state_completed: "completed", state_failed: "failed",
    state_cancelled: "cancelled", state_waiting: "waiting", state_done: "done",
    state_preparing: "preparing", state_sending: "sending", state_refused: "refused",
    state_requested: "requested", state_approved: "approved", state_revoked: "revoked",
    waited: "Waited", nominal: "fabric",
    circuits: "Circuits", circuit: "Circuit", state: "State", rtt: "RTT p50", jitter: "Jitter",
    loss: "Loss", load: "Load", routes: "Routes", route_src: "From", route_dst: "To",
    route_primary: "Primary path", route_backup: "Backup path",
    pools: "GPU pools", site: "Site", pool: "Pool", used: "In use", gpus: "GPUs",
    teams: "Teams", team: "Team", quota: "Guaranteed", usage: "Using", borrowed: "Borrowed",
    queue: "Queue", pending: "Pending", running: "Running", waiting_data: "Waiting for data",
    why: "Why is it waiting?", no_pending: "Nothing is waiting.",
    jobs: "Jobs", job: "Job", name: "Name", reason: "Reason", sites: "Sites", submitted: "Submitted",
    transfers: "Transfers in flight and recent", dataset: "Dataset", from_to: "From → to",
    progress: "Progress", rate: "Rate", eta: "ETA", paths: "Paths", no_transfers: "No transfers.",
    register_head: "Signed tree head", size: "Entries", root: "Root", signed_at: "Signed at",
    key: "Key", verification: "Verification", verifying: "checking…",
    verified: "verified in this browser: root and signature", key_changed: "the key differs from the one this browser saw before",
    root_mismatch: "the entries do not hash to the signed root", bad_signature: "the signature does not verify",
    entries_missing: "fewer entries than the head covers", entries: "Entries", approvals: "Approvals",
    exports: "Exports", purpose: "Purpose", valid_until: "Valid until", destinations: "To",
    no_entries: "No entries yet.", no_approvals: "No approvals.", no_exports: "No exports.", bytes_col: "Bytes",
    seq_col: "#", at_col: "Time", entry_col: "Entry",
    events: "Alerts and events", all_kinds: "all kinds", alerts_only: "alerts only",
    month: "Month", print: "Print / save as PDF", report_title: "GPU report",
    utilization_team: "Utilisation per team", utilization_site: "Utilisation per site",
    cost_team: "Cost per team", cost_site: "Cost per site", pooling: "Before and after pooling",
    wait_before: "mean wait, separate queues", wait_after: "mean wait, one queue",
    jct_before: "JCT, separate queues", jct_after: "JCT, one queue",
    gpu_hours: "GPU-hours", cost: "Cost", utilization: "Utilisation", mean_wait: "Mean wait",
    total: "Total", jobs_count: "Jobs", no_report: "No report for this month.",
    updated: "updated", error: "Error",
    pooling_wait: "Mean wait: separate queues, then one queue",
    pooling_jct: "Job completion time: separate queues, then one queue",
  },
  "zh-CN": {
    noc: "运维中心", live_on: "实时", live_retry: "重新连接中", live_off: "离线",
    sign_in_title: "登录运维视图",
    sign_in_help: "粘贴令牌：管理员、团队成员、合规或审计员。",
    sign_in: "登录", sign_out: "退出", bad_token: "此令牌在这里无效。",
    agent_token: "代理令牌只供代理程序使用，不供人员登录。",
    page_overview: "总览", page_jobs: "作业", page_transfers: "数据传输",
    page_register: "出境登记簿", page_events: "事件", page_report: "月度报告",
    not_for_role: "您的角色无权查看此页。",
    map: "站点与专线", path_from: "路径：从", path_to: "到",
    primary: "主路径", backup: "备份路径", unreachable: "不可达",
    state_up: "正常", state_degraded: "劣化", state_down: "中断", state_unknown: "未知",
    state_pending: "排队中", state_running: "运行中", state_preempting: "抢占中",
    state_cancelling: "取消中", state_completed: "已完成", state_failed: "失败",
    state_cancelled: "已取消", state_waiting: "等待中", state_done: "完成",
    state_preparing: "准备中", state_sending: "发送中", state_refused: "已拒绝",
    state_requested: "已申请", state_approved: "已批准", state_revoked: "已撤销",
    waited: "已等待", nominal: "设计值",
    circuits: "专线", circuit: "专线", state: "状态", rtt: "往返时延 p50", jitter: "抖动",
    loss: "丢包", load: "负载", routes: "路由", route_src: "从", route_dst: "到",
    route_primary: "主路径", route_backup: "备份路径",
    pools: "GPU 资源池", site: "站点", pool: "资源池", used: "使用中", gpus: "GPU 数",
    teams: "团队", team: "团队", quota: "保障配额", usage: "使用量", borrowed: "借用",
    queue: "队列", pending: "排队中", running: "运行中", waiting_data: "等待数据",
    why: "为什么在等待？", no_pending: "没有等待的作业。",
    jobs: "作业", job: "作业", name: "名称", reason: "原因", sites: "站点", submitted: "提交时间",
    transfers: "进行中与最近的传输", dataset: "数据集", from_to: "从 → 到",
    progress: "进度", rate: "速率", eta: "预计剩余", paths: "路径", no_transfers: "没有传输。",
    register_head: "签名树头", size: "条目数", root: "根哈希", signed_at: "签名时间",
    key: "公钥", verification: "验证", verifying: "验证中…",
    verified: "已在本浏览器中验证：根哈希与签名", key_changed: "公钥与本浏览器此前见到的不同",
    root_mismatch: "条目的哈希与签名的根不符", bad_signature: "签名验证失败",
    entries_missing: "条目少于树头所覆盖的数量", entries: "条目", approvals: "审批",
    exports: "出境", purpose: "用途", valid_until: "有效期至", destinations: "目的地",
    no_entries: "尚无条目。", no_approvals: "没有审批。", no_exports: "没有出境记录。", bytes_col: "字节数",
    seq_col: "序号", at_col: "时间", entry_col: "内容",
    events: "告警与事件", all_kinds: "全部类型", alerts_only: "仅告警",
    month: "月份", print: "打印 / 另存为 PDF", report_title: "GPU 报告",
    utilization_team: "各团队利用率", utilization_site: "各站点利用率",
    cost_team: "各团队费用", cost_site: "各站点费用", pooling: "资源池化前后对比",
    wait_before: "平均等待（分站点队列）", wait_after: "平均等待（统一队列）",
    jct_before: "完成时间（分站点队列）", jct_after: "完成时间（统一队列）",
    gpu_hours: "GPU 小时", cost: "费用", utilization: "利用率", mean_wait: "平均等待",
    total: "合计", jobs_count: "作业数", no_report: "本月没有报告。",
    updated: "更新于", error: "错误",
    pooling_wait: "平均等待：分站点队列与统一队列",
    pooling_jct: "作业完成时间：分站点队列与统一队列",
  },
};

const LANG_KEY = "onecluster.lang";
let lang = localStorage.getItem(LANG_KEY) || (navigator.language.startsWith("zh") ? "zh-CN" : "en");
if (!WORDS[lang]) lang = "en";

export const language = () => lang;

export function setLanguage(value) {
  lang = WORDS[value] ? value : "en";
  localStorage.setItem(LANG_KEY, lang);
  document.documentElement.lang = lang;
  translate(document);
}

export function t(key) {
  return WORDS[lang][key] ?? WORDS.en[key] ?? key;
}

export function translate(root) {
  for (const el of root.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
}
