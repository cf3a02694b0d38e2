"""docbench's text files: Markdown, HTML and TXT (UTF-8 and GBK)."""

from __future__ import annotations

# ------------------------------------------------------------------------------------------
# Text formats: Markdown, HTML, TXT (UTF-8 and GBK)
# ------------------------------------------------------------------------------------------

XR7000_SPEC_MD = """\
# XR-7000 Series Pressure Transmitter - Technical Specification

Document KI-TS-7000, revision C, March 2025. Product management, Kestrel Instruments.

## Overview

The XR-7000 series measures gauge and absolute pressure of liquids, gases and steam in
process plants. It replaces the XR-6000 series and is designed for oil and gas,
chemical and water applications.

## Specifications

| Parameter | Value |
|---|---|
| Measuring range | 0-10 bar to 0-40 bar |
| Accuracy | ±0.075 % of span |
| Operating temperature | -40 °C to 85 °C |
| Ingress protection | IP67 |
| Wetted parts | 316L stainless steel |

## Electrical

Output 4-20 mA with HART 7. Supply voltage 10.5 to 42 V DC. Reverse polarity protection
and surge protection to 1 kV are built in.

## Installation

Mount the transmitter above the tapping point for gases and below it for liquids. Use a
siphon for steam above 100 °C. Tighten the G1/2 process connection to 50 Nm.

## Calibration

The XR-7000 leaves the factory with a 5-point calibration certificate. We recommend a
recalibration every 24 months, or every 12 months in custody transfer applications.

## Ordering Codes

- XR-7710: 0-10 bar, G1/2, 4-20 mA HART
- XR-7725: 0-25 bar, G1/2, 4-20 mA HART
- XR-7741: 0-40 bar, G1/2, 4-20 mA HART
"""

XR5000_SPEC_MD = """\
# XR-5000 Series Pressure Transmitter - Technical Specification

Document KI-TS-5000, revision F, August 2023. Product management, Kestrel Instruments.

## Overview

The XR-5000 series is the economical pressure transmitter for machine building, HVAC and
general industry, where the XR-7000 series would be more than needed.

## Specifications

| Parameter | Value |
|---|---|
| Measuring range | 0-1 bar to 0-16 bar |
| Accuracy | ±0.25 % of span |
| Operating temperature | -20 °C to 70 °C |
| Ingress protection | IP65 |
| Wetted parts | 304 stainless steel |

## Electrical

Output 4-20 mA or 0-10 V. Supply voltage 12 to 36 V DC. No HART communication.

## Installation

Any mounting position. Tighten the G1/4 process connection to 25 Nm.

## Calibration

A 3-point factory calibration is included. Recalibrate every 12 months.
"""

REMOTE_WORK_MD = """\
# Remote Work Guidelines

Human Resources, Kestrel Instruments. Valid from 1 March 2025.

## Eligibility

Employees whose work can be done away from the plant may work remotely once they have
completed their six-month probation period. Production, laboratory and warehouse roles are
not eligible.

## Schedule

Eligible employees may work remotely up to two days per week, agreed with their manager
one week ahead. Core hours are 10:00 to 16:00 China Standard Time; during core hours
remote employees are reachable by phone and chat.

## Equipment

The company provides a laptop and a headset. For setting up a workplace at home, every
eligible employee receives a one-time home-office allowance of 1,500 CNY, paid with the
next salary after the first remote day.

## Security

Company data is only accessed through the VPN. Printing confidential documents at home is
not allowed. Public Wi-Fi may only be used together with the VPN.

## Requesting Remote Work

Requests are made in the HR portal and approved by the line manager. HR reviews the
arrangement after three months.
"""

REIMBURSEMENT_MD = """\
# 费用报销流程说明

财务部 2025 年 2 月修订。本说明规定费用报销的提交、审批和付款流程；差旅标准见《Travel and
Expense Policy 2025》。

## 一、提交

员工在费控系统中填写报销单，上传电子发票及相关附件。纸质发票须在提交后 5 个工作日内
交至财务部，并在报销单上注明单号。

## 二、审批

报销金额在 5,000 元以下的，由部门经理审批；5,000 元（含）以上的，还需财务总监审批。
项目费用须同时经项目经理确认。

## 三、付款

审批通过后，财务部在 10 个工作日内将报销款支付到员工的工资卡。每月 25 日之后通过审批的，
顺延至下月支付。

## 四、常见问题

发票抬头须为"凯斯特仪器有限公司"，税号须完整。发票丢失的，需提供情况说明并经部门经理签字。
"""

FAQ_HTML = """\
<!DOCTYPE html>
<html lang="zh-CN">
<head>
<meta charset="utf-8">
<title>客户常见问题 Customer FAQ</title>
<meta name="author" content="Kestrel Technical Support">
</head>
<body>
<h1>客户常见问题 Customer FAQ</h1>
<p>本页面回答客户关于保修、退货、固件和校准的常见问题。This page answers common
questions about warranty, returns, firmware and calibration.</p>
<h2>保修政策</h2>
<p>凯斯特仪器的所有产品自发货之日起保修 18 个月。保修范围包括材料和工艺缺陷，不包括
因安装不当、超量程使用或自行拆修造成的损坏。</p>
<h2>How do I return a product (RMA)?</h2>
<p>Request an RMA number in the customer portal before sending anything back. Pack the
device in its original packaging, write the RMA number on the box and ship it to our Suzhou
service centre. Devices without an RMA number are returned unopened.</p>
<h2>固件升级 Firmware update</h2>
<p>Firmware is updated with the KestrelLink app over Bluetooth or USB. The current release
for XR-7000 devices is version 4.2; it adds diagnostics for blocked impulse lines.
升级过程中请勿断电。</p>
<h2>校准证书</h2>
<p>每台设备出厂时均附带校准证书。如需 CNAS 认可的校准证书，请在下单时注明，
另收费 60 美元。</p>
<h2>联系技术支持 Contact support</h2>
<p>技术支持热线 400-820-6618，工作日 8:30 至 17:30。Support e-mail:
support@kestrel-instruments.com.</p>
</body>
</html>
"""

VPN_HTML = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>VPN and Remote Access Guide</title>
<meta name="author" content="Kestrel IT Service Desk">
</head>
<body>
<h1>VPN and Remote Access Guide</h1>
<p>How to reach company systems from outside the office.</p>
<h2>Installing the client</h2>
<p>Install the GlobalProtect client from the Software Center on your company laptop.
Private computers cannot be used for remote access.</p>
<h2>Connecting</h2>
<p>Open GlobalProtect, enter the portal address vpn.kestrel-instruments.com and sign in with
your company account. Confirm the sign-in in the authenticator app.</p>
<h2>Troubleshooting</h2>
<p>If the client shows error 0x80070005, the machine certificate is missing: open the
Software Center and run "Repair VPN certificate", then restart the laptop. If the connection
drops every few minutes, switch from Wi-Fi to a wired network or a mobile hotspot.</p>
<h2>Getting help</h2>
<p>The IT service desk is reachable at extension 6100 from 8:00 to 18:00 on working days.</p>
</body>
</html>
"""

ENGINEERING_SYNC_TXT = """\
Engineering Sync - 12 March 2025
Participants: Wang Lei (chair), Chen Jing, Markus Weber, Priya Nair, Zhao Min
Location: Suzhou R&D, room 3.14, and online

1. XR-7000 firmware 4.2
Chen Jing reported that all open defects of release 4.2 are closed except the display
flicker at -40 °C, which will be fixed in 4.2.1.
Decision: the firmware freeze for XR-7000 release 4.2 is on 28 March. Only fixes approved
by Wang Lei go in after the freeze.

2. Test bench procurement
Markus Weber compared three offers for the new automated pressure test bench. The offer of
Druck is the most expensive but has the shortest delivery time.
Decision: order the Druck bench; budget 1.35 million CNY, delivery expected in June.

3. HT-900 EMC testing
The in-house EMC chamber is booked by the XR-7000 certification until May.
Decision: the HT-900 EMC test moves to SGS Suzhou, because the in-house chamber is booked
until May. Priya Nair books the slot for the week of 14 April.

4. Tooling for the HT-900 housing
Zhao Min reported that the second injection mould for the HT-900 housing passed the first
article inspection. The remaining issue is a visible sink mark near the cable gland, which
the mould maker will correct by polishing. Cycle time is 38 seconds, two seconds better
than planned.

5. Supplier quality
Zhao Min summarised the incoming inspection results for February. The diaphragm supplier
Northstar Metals delivered two lots with a surface finish outside the drawing tolerance;
both were sorted at the supplier's cost. The share of rejected parts was 0.21 %, below the
0.3 % threshold of the supply agreement, so no corrective action plan is requested yet.
Quality will visit the Northstar plant in Singapore in May together with purchasing.

6. Documentation
The technical writers need the final HART command list for the XR-7000 user manual by the
end of March. Markus Weber will send it together with the device description files. The
Chinese manual is translated in parallel and reviewed by the Suzhou application team.

7. Any other business
Wang Lei reminded everyone that the annual safety training for the laboratory takes place
on 2 April. Attendance is mandatory for everyone who works with pressure above 10 bar.
The next engineering sync is on 26 March at 14:00.

Action items
- Chen Jing: fix the display flicker and prepare release 4.2.1 (due 11 April)
- Markus Weber: place the order for the Druck test bench (due 20 March)
- Priya Nair: book the EMC slot at SGS Suzhou and send the test plan (due 21 March)
- Zhao Min: confirm the polished mould and the sample dates (due 28 March)
- Markus Weber: send the HART command list to the technical writers (due 31 March)

Open questions
- Should the XR-7000 display support a Chinese menu in release 4.3? Product management to
  decide after the customer survey closes in April.
- Do we keep the old XR-6000 test fixtures after the switch to the new bench? Production
  engineering will check how many XR-6000 repairs are still expected this year.
- Can the HT-900 use the same cable gland as the XR-7000? Purchasing asks the supplier for
  a quote with the larger thread; Zhao Min checks whether the housing allows it.

Minutes: Priya Nair. Distribution: engineering team, product management, quality.
"""

BOARD_MINUTES_GBK_TXT = """\
2025年4月管理层会议纪要

时间：2025年4月22日 9:30-12:00
地点：苏州总部 5楼大会议室
出席：总经理 刘建国，财务总监 孙丽，研发副总 王磊，销售副总 陈晓东，生产副总 赵强
记录：行政部 周婷

一、第一季度经营情况
财务总监孙丽汇报：第一季度营业收入 3.86 亿元，同比增长 12%；毛利率 40.5%。
应收账款周转天数为 68 天，较上季度增加 5 天，主要原因是华北地区部分客户付款延迟。

二、苏州二期工厂
生产副总赵强汇报二期厂房建设进度：主体结构已完工，洁净车间正在装修。
会议决定：苏州二期工厂于2025年10月正式投产，首年产能目标为 12 万台变送器。

三、研发投入
会议决定：2025年研发预算由 3,600 万元增加到 4,200 万元，新增部分主要用于 HT-900
系列和无线传感器平台。

四、天津办事处
鉴于天津经销商退出市场，会议决定暂停天津办事处的运营，华北客户由北京办事处统一负责，
相关人员优先内部转岗。

五、其他事项
下次管理层会议定于2025年5月20日召开。
"""
