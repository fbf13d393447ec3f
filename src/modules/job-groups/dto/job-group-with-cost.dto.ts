import { ApiProperty } from '@nestjs/swagger';
import { JobGroupView } from './job-group.dto';
import { CostView } from '../../runs/dto/run-view.dto';

/** A group as the group routes show it: its view and the cost of its whole subtree. */
export class JobGroupWithCost extends JobGroupView {
  @ApiProperty({ type: () => CostView, description: 'The whole subtree.' })
  cost!: CostView;
}
